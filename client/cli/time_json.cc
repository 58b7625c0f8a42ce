#include "client/cli/time_json.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/cli/output.h"
#include "report/statistics.h"

namespace kprof::client {
namespace {

void Statistics(const kprof::v1::TimeStatistics& s, JsonLine& w) {
  w.Key("mean").Number(s.mean()).Key("median").Number(s.median()).Key("min").Number(s.min());
  w.Key("max").Number(s.max()).Key("std").Number(s.std()).Key("cv").Number(s.cv());
}

void Throughput(const kprof::v1::Throughput& t, JsonLine& w) {
  w.Key("throughput").Open();
  w.Key("bytes_per_call").Integer(t.bytes_per_call());
  w.Key("bytes_per_second").Number(t.bytes_per_second());
  w.Key("peak_bytes_per_second").Number(t.peak_bytes_per_second());
  w.Key("fraction_of_peak").Number(t.fraction_of_peak()).Key("peak").String(t.peak());
  w.Key("items_per_second").Number(t.items_per_second());
  w.Key("flop_per_second").Number(t.flop_per_second()).Close();
}

void Layouts(const kprof::v1::TimeEvaluateResponse& r, JsonLine& w) {
  w.Key("layouts").OpenArray();
  std::vector<double> medians;
  for (const kprof::v1::Layout& l : r.layouts()) {
    w.Open().Key("offsets").Integers(l.offsets()).Key("first_repeat").Integer(l.first_repeat());
    w.Key("repeats").Integer(l.repeats()).Key("median").Number(l.median()).Close();
    medians.push_back(l.median());
  }
  w.CloseArray();
  const auto [low, high] = std::minmax_element(medians.begin(), medians.end());
  const double middle = report::Median(medians);
  w.Key("layout_medians").Open().Key("min").Number(*low).Key("median").Number(middle);
  w.Key("max").Number(*high).Key("spread").Number(middle > 0 ? (*high - *low) / middle : 0.0);
  w.Close();
}

// The environment's metrics by name, as report::AsPlainJson writes a MetricMap: strings,
// counts, and the other numbers plain (null where not finite). Every metric has a value.
void Environment(const kprof::v1::MetricMap& metrics, JsonLine& w) {
  std::vector<std::pair<const std::string*, const kprof::v1::MetricValue*>> sorted;
  sorted.reserve(metrics.metrics().size());
  for (const auto& [name, value] : metrics.metrics()) sorted.emplace_back(&name, &value);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return *a.first < *b.first; });
  w.Key("environment").Open();
  for (const auto& [name, value] : sorted) {
    w.Key(*name);
    switch (value->value_case()) {
      case kprof::v1::MetricValue::kString:
        w.String(value->string());
        break;
      case kprof::v1::MetricValue::kCount:
        w.Integer(value->count());
        break;
      case kprof::v1::MetricValue::kMicroseconds:
        w.Number(value->microseconds());
        break;
      case kprof::v1::MetricValue::kPercent:
        w.Number(value->percent());
        break;
      default:
        w.Number(value->ratio());
    }
  }
  w.Close();
}

// What kprofd adds past TVM's keys about where and how the repeats ran.
void Conditions(const kprof::v1::TimeEvaluateResponse& r, JsonLine& w) {
  w.Key("mode").String(r.mode().empty() ? "hot" : r.mode());
  w.Key("placement").OpenArray();
  for (const kprof::v1::TensorPlacement& p : r.placement()) {
    w.Open().Key("alignment").Integer(p.alignment()).Key("offset").Integer(p.offset()).Close();
  }
  w.CloseArray().Key("huge_pages").Bool(r.huge_pages());
  w.Key("throttled_repeats").Integers(r.throttled_repeats());
  w.Key("discarded_throttled").Integer(r.discarded_throttled());
  if (r.cuda_graph() > 0) w.Key("cuda_graph").Integer(r.cuda_graph());
  if (r.run_order_size() > 0) w.Key("run_order").Integers(r.run_order());
  if (!r.throttle_check().empty()) w.Key("throttle_check").String(r.throttle_check());
  if (r.clock_reasons_size() > 0) {
    w.Key("clock_reasons").Open();
    for (const kprof::v1::ClockReason& c : r.clock_reasons()) {
      w.Key(c.reason()).Integers(c.repeats());
    }
    w.Close();
  }
  if (r.layouts_size() > 0) Layouts(r, w);
}

}  // namespace

absl::Status WriteTimeMembers(const kprof::v1::TimeEvaluateResponse& r, JsonLine& w) {
  // Checked first, so that a bad environment writes nothing.
  for (const auto& [name, value] : r.environment().metrics()) {
    if (value.value_case() == kprof::v1::MetricValue::VALUE_NOT_SET) {
      return absl::InvalidArgumentError(
          absl::StrCat("report: environment.\"", name, "\" has no value"));
    }
  }
  w.Key("results").Numbers(r.seconds_per_call());
  Statistics(r.statistics(), w);
  w.Key("number").Integer(r.final_number()).Key("repeat").Integer(r.seconds_per_call_size());
  w.Key("numbers").Integers(r.numbers()).Key("device").String(r.device());
  w.Key("argument_shapes").String(r.argument_shapes());
  w.Key("queue_wait_seconds").Number(r.timing().queue_wait_seconds());
  w.Key("execution_seconds").Number(r.timing().execution_seconds());
  w.Key("rel_stddev").Number(r.rel_stddev()).Key("stop_reason").String(r.stop_reason());
  w.Key("warnings").Strings(r.warnings());
  if (r.has_converged()) w.Key("converged").Bool(r.converged());
  if (r.has_cpu_wait()) w.Key("cpu_wait").Number(r.cpu_wait());
  if (r.has_filtered_statistics()) {
    w.Key("outliers").Integers(r.outliers()).Key("filtered").Open();
    Statistics(r.filtered_statistics(), w);
    w.Close();
  }
  if (r.checksums_size() > 0) w.Key("checksums").Strings(r.checksums());
  if (r.has_check()) w.Key("check").Raw(VerdictJson(r.check()).dump());
  if (r.has_throughput()) Throughput(r.throughput(), w);
  if (r.has_output()) {
    w.Key("output").Open().Key("tail").String(r.output().tail());
    w.Key("bytes").Integer(r.output().bytes()).Close();
  }
  Conditions(r, w);
  Environment(r.environment(), w);
  return absl::OkStatus();
}

absl::StatusOr<Json> TimeJson(const kprof::v1::TimeEvaluateResponse& r) {
  JsonLine w;
  w.Open();
  KPROF_RETURN_IF_ERROR(WriteTimeMembers(r, w));
  w.Close();
  return Json::parse(w.text());
}

}  // namespace kprof::client

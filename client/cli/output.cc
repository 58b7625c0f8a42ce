#include "client/cli/output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/wire.h"
#include "report/statistics.h"

namespace kprof::client {

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t' && c != 0) || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(text[++i]));  // C1
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

namespace {

// Whether Printable would change `text`: a byte it writes out.
bool NeedsWritingOut(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t' && c != 0) || c == 0x7f || c == 0xc2) return true;
  }
  return false;
}

}  // namespace

void Print(std::string_view text) {
  if (!NeedsWritingOut(text)) {  // the common case, without a copy
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  const std::string printable = Printable(text);
  std::fwrite(printable.data(), 1, printable.size(), stdout);
}

namespace {

void NumbersIn(Json& object, const google::protobuf::Descriptor& type);

// A 64-bit integer field's value, which protobuf's JSON writes as a string, as a number.
void Number(Json& value, const google::protobuf::FieldDescriptor& field) {
  using google::protobuf::FieldDescriptor;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64:
      if (value.is_string()) value = std::stoll(value.get<std::string>());
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      if (value.is_string()) value = std::stoull(value.get<std::string>());
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      // Well-known types (Duration, Timestamp, Struct) have JSON forms of their own.
      if (value.is_object() && field.message_type()->file()->package() != "google.protobuf") {
        NumbersIn(value, *field.message_type());
      }
      break;
    default:
      break;
  }
}

void NumbersIn(Json& object, const google::protobuf::Descriptor& type) {
  for (int i = 0; i < type.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& field = *type.field(i);
    const auto found = object.find(field.name());
    if (found == object.end()) continue;
    if (field.is_map()) {
      for (auto& [key, item] : found->items()) Number(item, *field.message_type()->map_value());
    } else if (field.is_repeated()) {
      for (Json& item : *found) Number(item, field);
    } else {
      Number(*found, field);
    }
  }
}

}  // namespace

std::string ProtoJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) {
    return "{}\n";  // not for the messages kprof prints (no Any among them)
  }
  // Sizes and counts are numbers, as in every other JSON kprof writes; protobuf writes 64-bit
  // integers as strings.
  Json json = Json::parse(text);
  NumbersIn(json, *message.GetDescriptor());
  return json.dump(1) + "\n";
}

void PrintReport(const report::Report& report, const std::string& format,
                 const report::TableOptions& table) {
  if (format == "html") {
    Print(report::AsHtml(report));
  } else if (format == "trace") {
    Print(report::AsChromeTrace(report) + "\n");
  } else if (format == "json") {
    Print(report::AsJson(report) + "\n");
  } else if (format == "csv") {
    Print(report::AsCsv(report));
  } else {
    Print(report::AsTable(report, table));
  }
}

namespace {

// The median of each randomized layout's repeats, in turn.
std::vector<double> LayoutMedians(const kprof::v1::TimeEvaluateResponse& r) {
  std::vector<double> medians;
  for (const kprof::v1::Layout& l : r.layouts()) medians.push_back(l.median());
  return medians;
}

}  // namespace

std::string PlacementLine(const kprof::v1::TimeEvaluateResponse& r) {
  std::string line = r.mode().empty() ? "hot" : r.mode();
  if (r.cuda_graph() > 0) absl::StrAppend(&line, ", graphs of ", r.cuda_graph(), " launches");
  absl::StrAppend(&line, "; arguments at");
  for (int i = 0; i < r.placement_size(); ++i) {
    absl::StrAppend(&line, i == 0 ? " " : ", ", "+", r.placement(i).offset(), " (aligned ",
                    r.placement(i).alignment(), ")");
  }
  if (r.placement_size() == 0) absl::StrAppend(&line, " (not reported)");
  absl::StrAppend(&line, " past a page boundary");
  if (r.huge_pages()) absl::StrAppend(&line, "; huge pages asked");
  if (r.layouts_size() > 0) {
    const std::vector<double> medians = LayoutMedians(r);
    const auto [low, high] = std::minmax_element(medians.begin(), medians.end());
    absl::StrAppendFormat(&line, "; %d random layouts, their medians %.3f us .. %.3f us",
                          r.layouts_size(), *low * 1e6, *high * 1e6);
  }
  return line;
}

std::string ClockLine(const kprof::v1::TimeEvaluateResponse& r) {
  std::string line = "clock: ";
  if (!r.throttle_check().empty() && r.throttled_repeats_size() == 0) {
    absl::StrAppend(&line, "throttling not checked (", r.throttle_check(), ")");
  } else if (r.discarded_throttled() > 0) {
    absl::StrAppend(&line, r.discarded_throttled(), " throttled repeat(s) dropped");
  } else {
    absl::StrAppend(&line, r.throttled_repeats_size(), " throttled repeat(s)");
  }
  for (const kprof::v1::ClockReason& c : r.clock_reasons()) {
    absl::StrAppend(&line, "; GPU clock held back (", c.reason(), ") in ", c.repeats_size(),
                    " repeat(s)");
  }
  return line;
}

std::string RepeatsHistogram(const std::vector<double>& seconds) {
  static constexpr const char* kBars[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  // Far-out repeats are counted apart: one stalled repeat would squeeze the rest into one bar.
  const std::vector<double> kept =
      report::Without(seconds, report::TukeyOutliers(seconds, report::kFarOut));
  const size_t bins = std::clamp<size_t>(kept.size(), 1, 20);
  const std::vector<size_t> counts = report::Histogram(kept, bins);
  if (counts.empty()) return "repeats  (none)";
  const size_t most = *std::max_element(counts.begin(), counts.end());
  std::string bars;
  for (const size_t n : counts) {
    // An empty bin is a space; any other is at least the lowest bar.
    bars += kBars[n == 0 ? 0 : std::max<size_t>(1, (n * 8 + most - 1) / most)];
  }
  const double low = report::Min(kept), high = report::Max(kept);
  size_t below = 0, above = 0;
  for (const double s : seconds) {
    if (s < low) ++below;
    if (s > high) ++above;
  }
  std::vector<std::string> beyond;
  if (below > 0) {
    beyond.push_back(absl::StrCat(below, " far below, down to ", Seconds(report::Min(seconds))));
  }
  if (above > 0) {
    beyond.push_back(absl::StrCat(above, " far above, up to ", Seconds(report::Max(seconds))));
  }
  const std::string line = absl::StrFormat("repeats  %s  %s .. %s (%d in %d bins", bars,
                                           Seconds(low), Seconds(high), kept.size(), bins);
  const std::string far = absl::StrJoin(beyond, "; ");
  // On one line while it fits a terminal's 100 columns (a bar is one column, three bytes);
  // else the far-out repeats on a line of their own beneath.
  size_t columns = 0;
  for (const unsigned char c : line) columns += (c & 0xc0) != 0x80;
  if (far.empty()) return line + ")";
  if (columns + 2 + far.size() + 1 <= 100) return absl::StrCat(line, "; ", far, ")");
  return absl::StrCat(line, ")\n         ", far);
}

namespace {

std::string OutcomeName(kprof::v1::CheckVerdict::Outcome outcome) {
  switch (outcome) {
    case kprof::v1::CheckVerdict::PASSED:
      return "passed";
    case kprof::v1::CheckVerdict::WRONG:
      return "wrong";
    case kprof::v1::CheckVerdict::REFERENCE_FAILED:
      return "reference failed";
    default:
      return "unknown";
  }
}

}  // namespace

Json VerdictJson(const kprof::v1::CheckVerdict& v) {
  Json mismatches = Json::array();
  for (const kprof::v1::ArgumentCheck& a : v.mismatches()) {
    mismatches.push_back({{"argument", a.argument()},
                          {"input", a.input()},
                          {"mismatched", a.mismatched()},
                          {"elements", a.elements()},
                          {"first_index", a.first_index()},
                          {"got", a.got()},
                          {"expected", a.expected()},
                          {"max_abs_error", a.max_abs_error()},
                          {"max_rel_error", a.max_rel_error()},
                          {"rtol", a.rtol()},
                          {"atol", a.atol()}});
  }
  Json json = {{"outcome", OutcomeName(v.outcome())},
               {"reference", v.reference()},
               {"outputs", std::vector<int32_t>(v.outputs().begin(), v.outputs().end())},
               {"max_abs_error", v.max_abs_error()},
               {"max_rel_error", v.max_rel_error()},
               {"check_seconds", v.check_seconds()},
               {"reference_reused", v.reference_reused()},
               {"mismatches", mismatches}};
  if (!v.reference_error().empty()) json["reference_error"] = v.reference_error();
  if (v.level() == kprof::v1::AnswerCheck::STRICT) {
    json["checks"] = "strict";
    json["checked_repeats"] =
        std::vector<int64_t>(v.checked_repeats().begin(), v.checked_repeats().end());
    json["fresh_inputs"] = v.fresh_inputs();
  }
  return json;
}

std::string VerdictLine(const kprof::v1::CheckVerdict& v) {
  // Strict: which repeats were checked (1-based, as the failures name them).
  std::string strict;
  if (v.level() == kprof::v1::AnswerCheck::STRICT) {
    std::vector<int64_t> repeats;
    for (const int64_t r : v.checked_repeats()) repeats.push_back(r + 1);
    strict = absl::StrFormat("; strict: repeats %s checked, %d on fresh inputs",
                             absl::StrJoin(repeats, ","), v.fresh_inputs());
  }
  return absl::StrFormat(
      "check: %s against %s (outputs %s; largest errors abs %.3g, rel %.3g%s; %.3f ms)",
      OutcomeName(v.outcome()), v.reference(), absl::StrJoin(v.outputs(), ","), v.max_abs_error(),
      v.max_rel_error(), strict, v.check_seconds() * 1e3);
}

std::string ThroughputLine(const kprof::v1::Throughput& t) {
  std::string line = absl::StrFormat("throughput: %.4g GB/s of %d bytes a call",
                                     t.bytes_per_second() / 1e9, t.bytes_per_call());
  if (t.peak_bytes_per_second() > 0) {
    absl::StrAppendFormat(&line, " (%.1f%% of the device's %s peak, %.4g GB/s)",
                          t.fraction_of_peak() * 100, t.peak(), t.peak_bytes_per_second() / 1e9);
  }
  if (t.items_per_second() > 0)
    absl::StrAppendFormat(&line, "; %.4g items/s", t.items_per_second());
  if (t.flop_per_second() > 0) {
    absl::StrAppendFormat(&line, "; %.4g GFLOP/s", t.flop_per_second() / 1e9);
  }
  return line;
}

std::string OutputBlock(const kprof::v1::JobOutput& output) {
  if (output.bytes() == 0) return "";
  std::string tail = output.tail();
  if (!tail.empty() && tail.back() != '\n') tail += '\n';
  const bool cut = output.bytes() > static_cast<int64_t>(output.tail().size());
  return absl::StrCat(
      "\nOutput",
      cut ? absl::StrCat(" (its last ", output.tail().size(), " of ", output.bytes(), " bytes)")
          : "",
      "\n------\n", tail);
}

std::optional<kprof::v1::CheckVerdict> VerdictOf(const absl::Status& status) {
  const auto payload = status.GetPayload("type.googleapis.com/kprof.v1.CheckVerdict");
  kprof::v1::CheckVerdict verdict;
  if (!payload.has_value() || !verdict.ParseFromString(std::string(*payload))) return std::nullopt;
  return verdict;
}

std::string Seconds(double s) {
  if (std::isnan(s)) return "-";
  const double a = std::fabs(s);
  if (a < 1e-6) return absl::StrFormat("%.1f ns", s * 1e9);
  if (a < 1e-3) return absl::StrFormat("%.2f us", s * 1e6);
  if (a < 1) return absl::StrFormat("%.3f ms", s * 1e3);
  return absl::StrFormat("%.3f s", s);
}

std::string Wrapped(std::string_view text, std::string_view first, size_t width) {
  const std::string indent(first.size(), ' ');
  std::string out, line(first);
  bool empty = true;  // no word on the line yet
  for (absl::string_view word :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ' ', absl::SkipEmpty())) {
    if (!empty && line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, line, "\n");
      line = indent;
      empty = true;
    }
    absl::StrAppend(&line, empty ? "" : " ", word);
    empty = false;
  }
  absl::StrAppend(&out, line, "\n");
  return out;
}

std::string EnvironmentLine(const report::MetricMap& manifest) {
  std::vector<std::string> shown;
  for (const char* name : {"Host", "CPU model", "CPUs online", "GPU"}) {
    if (const auto found = manifest.find(name); found != manifest.end()) {
      const std::string value = report::FormatForTable(found->second);
      shown.push_back(std::string(name) == "CPUs online" ? value + " CPUs" : value);
    }
  }
  return absl::StrCat("  environment: ", absl::StrJoin(shown, ", "), " (--environment: all ",
                      manifest.size(), ")\n");
}

std::string EnvironmentBlock(const report::MetricMap& manifest) {
  std::string out = "\nEnvironment\n-----------\n";
  for (const auto& [name, value] : manifest) {
    absl::StrAppend(&out, name, ": ", report::FormatForTable(value), "\n");
  }
  return out;
}

}  // namespace kprof::client

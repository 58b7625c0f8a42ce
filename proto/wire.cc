#include "proto/wire.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kprof::wire {
namespace {

kprof::v1::MetricValue ToProto(const report::MetricValue& value) {
  kprof::v1::MetricValue out;
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out.set_string(v);
        } else if constexpr (std::is_same_v<T, report::Count>) {
          out.set_count(v.value);
        } else if constexpr (std::is_same_v<T, report::Duration>) {
          out.set_microseconds(v.microseconds);
        } else if constexpr (std::is_same_v<T, report::Percent>) {
          out.set_percent(v.percent);
        } else {
          out.set_ratio(v.ratio);
        }
      },
      value);
  return out;
}

}  // namespace

void ToProto(const report::MetricMap& metrics, kprof::v1::MetricMap* out) {
  for (const auto& [name, value] : metrics) (*out->mutable_metrics())[name] = ToProto(value);
}

absl::StatusOr<report::MetricMap> FromProto(const kprof::v1::MetricMap& metrics,
                                            const std::string& where) {
  report::MetricMap out;
  for (const auto& [name, value] : metrics.metrics()) {
    switch (value.value_case()) {
      case kprof::v1::MetricValue::kString:
        out.emplace(name, value.string());
        break;
      case kprof::v1::MetricValue::kCount:
        out.emplace(name, report::Count{value.count()});
        break;
      case kprof::v1::MetricValue::kMicroseconds:
        out.emplace(name, report::Duration{value.microseconds()});
        break;
      case kprof::v1::MetricValue::kPercent:
        out.emplace(name, report::Percent{value.percent()});
        break;
      case kprof::v1::MetricValue::kRatio:
        out.emplace(name, report::Ratio{value.ratio()});
        break;
      case kprof::v1::MetricValue::VALUE_NOT_SET:
        return absl::InvalidArgumentError(
            absl::StrCat("report: ", where, ".\"", name, "\" has no value"));
    }
  }
  return out;
}

kprof::v1::Report ToProto(const report::Report& report) {
  kprof::v1::Report out;
  for (const report::MetricMap& call : report.calls) ToProto(call, out.add_calls());
  for (const auto& [device, metrics] : report.device_metrics) {
    ToProto(metrics, &(*out.mutable_device_metrics())[device]);
  }
  ToProto(report.configuration, out.mutable_configuration());
  return out;
}

absl::StatusOr<report::Report> FromProto(const kprof::v1::Report& report) {
  report::Report out;
  for (int i = 0; i < report.calls_size(); ++i) {
    auto call = FromProto(report.calls(i), absl::StrCat("calls[", i, "]"));
    if (!call.ok()) return call.status();
    out.calls.push_back(*std::move(call));
  }
  for (const auto& [device, metrics] : report.device_metrics()) {
    auto parsed = FromProto(metrics, absl::StrCat("device_metrics.\"", device, "\""));
    if (!parsed.ok()) return parsed.status();
    out.device_metrics.emplace(device, *std::move(parsed));
  }
  auto configuration = FromProto(report.configuration(), "configuration");
  if (!configuration.ok()) return configuration.status();
  out.configuration = *std::move(configuration);
  return out;
}

std::string CollectorSpecText(const kprof::v1::CollectorSpec& spec) {
  if (spec.options().empty()) return spec.name();
  return absl::StrCat(spec.name(), ":", absl::StrJoin(spec.options(), ","));
}

}  // namespace kprof::wire

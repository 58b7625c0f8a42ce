#include "report/metric.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace kprof::report {
namespace {

// Inserts a comma every three digits of the integer part of `number`, which is the output of
// printf's %d or %.Nf: an optional '-', digits, then optionally '.' and more digits.
std::string GroupThousands(std::string number) {
  const size_t digits_begin = (!number.empty() && number[0] == '-') ? 1 : 0;
  size_t digits_end = number.find('.');
  if (digits_end == std::string::npos) digits_end = number.size();
  for (size_t i = digits_end; i > digits_begin + 3; i -= 3) number.insert(i - 3, ",");
  return number;
}

std::string NonFinite(double value) {
  if (std::isnan(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

std::string Printf(const char* format, double value) {
  char buffer[512];  // %.2f of the largest double needs 312 characters
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

}  // namespace

MetricKind KindOf(const MetricValue& value) { return static_cast<MetricKind>(value.index()); }

std::string_view KindKey(MetricKind kind) {
  switch (kind) {
    case MetricKind::kString:
      return "string";
    case MetricKind::kCount:
      return "count";
    case MetricKind::kDuration:
      return "microseconds";
    case MetricKind::kPercent:
      return "percent";
    case MetricKind::kRatio:
      return "ratio";
  }
  return "unknown";
}

std::optional<MetricKind> KindFromKey(std::string_view key) {
  for (MetricKind kind : {MetricKind::kString, MetricKind::kCount, MetricKind::kDuration,
                          MetricKind::kPercent, MetricKind::kRatio}) {
    if (KindKey(kind) == key) return kind;
  }
  return std::nullopt;
}

std::string ShortestDecimal(double value) {
  if (!std::isfinite(value)) return NonFinite(value);
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string FormatForTable(const MetricValue& value) {
  struct Formatter {
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(Count c) const { return GroupThousands(std::to_string(c.value)); }
    std::string operator()(Duration d) const {
      if (!std::isfinite(d.microseconds)) return NonFinite(d.microseconds);
      return GroupThousands(Printf("%.2f", d.microseconds));
    }
    std::string operator()(Percent p) const {
      if (!std::isfinite(p.percent)) return NonFinite(p.percent);
      return Printf("%.2f", p.percent);
    }
    std::string operator()(Ratio r) const {
      if (!std::isfinite(r.ratio)) return NonFinite(r.ratio);
      return Printf("%.2g", r.ratio);
    }
  };
  return std::visit(Formatter{}, value);
}

}  // namespace kprof::report

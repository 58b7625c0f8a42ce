// The CSV rendering of a Report's calls (RFC 4180 quoting).
#include <set>
#include <string>
#include <vector>

#include "report/report.h"

namespace kprof::report {
namespace {

void AppendQuoted(std::string* out, std::string_view text) {
  out->push_back('"');
  for (char ch : text) {
    if (ch == '"') out->push_back('"');
    out->push_back(ch);
  }
  out->push_back('"');
}

// Headers are quoted only when they must be, so a plain header line stays plain.
void AppendHeader(std::string* out, std::string_view name) {
  if (name.find_first_of(",\"\r\n") == std::string_view::npos) {
    out->append(name);
  } else {
    AppendQuoted(out, name);
  }
}

void AppendValue(std::string* out, const MetricValue& value) {
  struct Writer {
    std::string* out;
    void operator()(const std::string& s) const { AppendQuoted(out, s); }
    void operator()(Count c) const { out->append(std::to_string(c.value)); }
    void operator()(Duration d) const { out->append(ShortestDecimal(d.microseconds)); }
    void operator()(Percent p) const { out->append(ShortestDecimal(p.percent)); }
    void operator()(Ratio r) const { out->append(ShortestDecimal(r.ratio)); }
  };
  std::visit(Writer{out}, value);
}

}  // namespace

std::string CsvQuoted(std::string_view text) {
  std::string out;
  AppendQuoted(&out, text);
  return out;
}

std::string AsCsv(const Report& report) {
  // The table's order: its first columns, where the calls have them, then the rest by name.
  std::set<std::string_view> named;
  for (const MetricMap& call : report.calls) {
    for (const auto& entry : call) named.insert(entry.first);
  }
  std::vector<std::string_view> headers;
  for (std::string_view first : {kNameMetric, kDurationMetric, kPercentMetric, kDeviceMetric,
                                 kCountMetric, kArgumentShapesMetric}) {
    if (named.erase(first) > 0) headers.push_back(first);
  }
  headers.insert(headers.end(), named.begin(), named.end());

  std::string out;
  bool first = true;
  for (std::string_view name : headers) {
    if (!first) out.push_back(',');
    first = false;
    AppendHeader(&out, name);
  }
  out.push_back('\n');
  for (const MetricMap& call : report.calls) {
    first = true;
    for (std::string_view name : headers) {
      if (!first) out.push_back(',');
      first = false;
      const auto it = call.find(name);
      if (it != call.end()) AppendValue(&out, it->second);
    }
    out.push_back('\n');
  }
  return out;
}

}  // namespace kprof::report

// A Report as a self-contained HTML page: each device's calls as bars, then the table.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/report.h"

namespace kprof::report {
namespace {

std::string TextOf(const MetricMap& call, std::string_view metric, const std::string& fallback) {
  const auto it = call.find(metric);
  return it != call.end() && std::holds_alternative<std::string>(it->second)
             ? std::get<std::string>(it->second)
             : fallback;
}

// A call's duration in microseconds where it is a positive, finite one; else 0.
double DurationOf(const MetricMap& call) {
  const auto it = call.find(kDurationMetric);
  if (it == call.end() || !std::holds_alternative<Duration>(it->second)) return 0;
  const double us = std::get<Duration>(it->second).microseconds;
  return std::isfinite(us) && us > 0 ? us : 0;
}

}  // namespace

std::string XmlEscaped(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        if (static_cast<unsigned char>(ch) >= 0x20 || ch == '\t' || ch == '\n' || ch == '\r') {
          out += ch;
        }
    }
  }
  return out;
}

std::string AsHtml(const Report& report) {
  const std::vector<MetricMap> calls = AggregateCalls(report.calls);
  std::map<std::string, std::vector<const MetricMap*>> by_device;
  double longest = 0;
  for (const MetricMap& call : calls) {
    by_device[TextOf(call, kDeviceMetric, "unknown device")].push_back(&call);
    longest = std::max(longest, DurationOf(call));
  }
  constexpr int kBarLeft = 220, kBarWidth = 460;
  int height = 10;
  for (const auto& [device, list] : by_device) height += 28 + 22 * static_cast<int>(list.size());
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"820\" height=\"%d\">\n", height);
  int y = 10;
  for (const auto& [device, list] : by_device) {
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"0\" y=\"%d\" font-size=\"14\" "
                                          "font-weight=\"bold\">%s</text>\n",
                                          y + 16, XmlEscaped(device)));
    y += 28;
    for (const MetricMap* call : list) {
      const double us = DurationOf(*call);
      const double width = longest > 0 ? kBarWidth * us / longest : 0;
      absl::StrAppend(
          &svg,
          absl::StrFormat(
              "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">%s</text>\n",
              kBarLeft - 8, y + 13, XmlEscaped(TextOf(*call, kNameMetric, "call"))),
          absl::StrFormat("<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" "
                          "fill=\"#4a78c2\"/>\n",
                          kBarLeft, y, width),
          absl::StrFormat("<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%.3f us</text>\n",
                          kBarLeft + width + 6, y + 13, us));
      y += 22;
    }
  }
  absl::StrAppend(&svg, "</svg>\n");
  return absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kprof report</title>\n"
      "<style>body{font-family:sans-serif;margin:24px}pre{font-size:12px}</style></head>\n"
      "<body>\n<h1>kprof report</h1>\n<h2>Calls by device</h2>\n",
      svg, "<h2>Table</h2>\n<pre>", XmlEscaped(AsTable(report)), "</pre>\n</body></html>\n");
}

}  // namespace kprof::report

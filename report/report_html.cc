// A Report as a self-contained HTML page: each device's calls as bars, then a table of them that
// sorts by the column clicked (a few lines of script), then the configuration.
#include <algorithm>
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

// A cell's number for sorting (a data-v attribute), "" for a string.
std::string SortValue(const MetricValue& value) {
  if (const auto* c = std::get_if<Count>(&value)) return std::to_string(c->value);
  if (const auto* d = std::get_if<Duration>(&value)) return ShortestDecimal(d->microseconds);
  if (const auto* p = std::get_if<Percent>(&value)) return ShortestDecimal(p->percent);
  if (const auto* r = std::get_if<Ratio>(&value)) return ShortestDecimal(r->ratio);
  return "";
}

// A row of cells: <td>, with data-v where the value is a number.
std::string HtmlRow(const MetricMap& row, const std::vector<std::string>& columns) {
  std::string out = "<tr>";
  for (const std::string& column : columns) {
    const auto it = row.find(column);
    if (it == row.end()) {
      out += "<td></td>";
      continue;
    }
    const std::string v = SortValue(it->second);
    absl::StrAppend(&out, v.empty() ? "<td>" : absl::StrCat("<td data-v=\"", v, "\">"),
                    XmlEscaped(FormatForTable(it->second)), "</td>");
  }
  return out + "</tr>\n";
}

// Sorts a table.sortable by the column whose heading is clicked (numbers by value, text by
// text; again, the other way), or, on opening, by "#sort=N" (ascending) or "#sort=-N".
constexpr char kSortScript[] =
    "<script>\n"
    "function kprofSort(t,i,asc){var b=t.tBodies[0],r=Array.from(b.rows);"
    "r.sort(function(x,y){var a=x.cells[i],c=y.cells[i],p=a.dataset.v,q=c.dataset.v;"
    "var d=(p!==undefined&&q!==undefined)?p-q:a.textContent.localeCompare(c.textContent);"
    "return asc?d:-d});r.forEach(function(e){b.appendChild(e)});t.dataset.sorted=i+(asc?'':'-')}\n"
    "document.querySelectorAll('table.sortable').forEach(function(t){"
    "t.tHead.querySelectorAll('th').forEach(function(h,i){h.addEventListener('click',function(){"
    "kprofSort(t,i,t.dataset.sorted!==String(i))})});"
    "var m=/^#sort=(-?)(\\d+)$/.exec(location.hash);if(m)kprofSort(t,+m[2],m[1]!=='-')});\n"
    "</script>\n";

std::string HtmlTable(const Report& report) {
  std::vector<MetricMap> rows = AggregateCalls(report.calls);
  std::stable_sort(rows.begin(), rows.end(), [](const MetricMap& a, const MetricMap& b) {
    return DurationOf(a) > DurationOf(b);
  });
  std::vector<MetricMap> totals;
  for (const auto& [device, metrics] : report.device_metrics) {
    MetricMap total = metrics;
    total[std::string(kNameMetric)] = std::string("Total");
    totals.push_back(std::move(total));
  }
  std::vector<MetricMap> all = rows;
  all.insert(all.end(), totals.begin(), totals.end());
  const std::vector<std::string> columns = TableColumns(all);
  std::string out = "<table class=\"sortable\">\n<thead><tr>";
  for (const std::string& c : columns) absl::StrAppend(&out, "<th>", XmlEscaped(c), "</th>");
  out += "</tr></thead>\n<tbody>\n";
  for (const MetricMap& row : rows) out += HtmlRow(row, columns);
  out += "</tbody>\n<tfoot>\n";
  for (const MetricMap& total : totals) out += HtmlRow(total, columns);
  out += "</tfoot>\n</table>\n<h2>Configuration</h2>\n<table>\n";
  for (const auto& [name, value] : report.configuration) {
    absl::StrAppend(&out, "<tr><th>", XmlEscaped(name), "</th><td>",
                    XmlEscaped(FormatForTable(value)), "</td></tr>\n");
  }
  return out + "</table>\n";
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
      "<style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse;"
      "font-size:13px}th,td{border:1px solid #ccc;padding:2px 8px}td[data-v]{text-align:right}"
      "thead th{cursor:pointer;background:#eee}</style></head>\n"
      "<body>\n<h1>kprof report</h1>\n<h2>Calls by device</h2>\n",
      svg, "<h2>Calls</h2>\n", HtmlTable(report), kSortScript, "</body></html>\n");
}

}  // namespace kprof::report

#include "client/cli/plot_svg.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/report.h"
#include "report/statistics.h"

namespace kprof::client {
namespace {

constexpr int kWidth = 720;
constexpr int kLeft = 60, kRight = 30;  // margins of the plotting area

std::string Text(double x, double y, const std::string& text, const char* anchor = "start",
                 int size = 12, const char* extra = "") {
  return absl::StrFormat(
      "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"%d\" "
      "text-anchor=\"%s\"%s>%s</text>\n",
      x, y, size, anchor, extra, report::XmlEscaped(text));
}

std::string Microseconds(double seconds) { return absl::StrFormat("%.3f us", seconds * 1e6); }

std::string Open(int height) {
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
      "%d\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, height, kWidth, height);
}

// The axis a histogram is drawn on: from the smallest to the largest repeat within the far-out
// fences of all the repeats it shows, and a slot at either end for the repeats beyond, when
// there are any, drawn as one bar of their own with their count.
struct Frame {
  double low = 0, high = 0;  // the axis
  double min = 0, max = 0;   // all the repeats
  bool below = false, above = false;
};
constexpr double kSlot = 40;  // the width of an end's slot

Frame FrameOf(const std::vector<double>& seconds) {
  const std::vector<double> kept =
      report::Without(seconds, report::TukeyOutliers(seconds, report::kFarOut));
  Frame f;
  std::tie(f.low, f.high) = std::pair{report::Min(kept), report::Max(kept)};
  std::tie(f.min, f.max) = std::pair{report::Min(seconds), report::Max(seconds)};
  f.below = f.min < f.low;
  f.above = f.max > f.high;
  return f;
}

double AxisLeft(const Frame& f) { return kLeft + (f.below ? kSlot : 0); }
double AxisRight(const Frame& f) { return kWidth - kRight - (f.above ? kSlot : 0); }

std::string Bar(double x, double bottom, double width, double h, const char* colour,
                const char* extra = "") {
  return absl::StrFormat(
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
      "fill=\"%s\"%s/>\n",
      x, bottom - h, width, h, colour, extra);
}

// A bar of the `count` repeats beyond the axis at one end, in its slot from `x`, with its count.
std::string EndBar(double x, size_t count, double scale, double bottom, const char* colour) {
  if (count == 0) return "";
  const double h = std::max(2.0, scale * static_cast<double>(count));
  return Bar(x + 6, bottom, kSlot - 12, h, colour, " fill-opacity=\"0.5\"") +
         Text(x + kSlot / 2, bottom - h - 3, absl::StrCat(count), "middle", 10, " fill=\"#666\"");
}

// A histogram of `seconds` on `frame`'s axis in the box from `top`, `height` tall, with its
// median marked.
std::string HistogramAt(const std::vector<double>& seconds, const Frame& frame, double top,
                        double height, const char* colour, const std::string& label) {
  const double low = frame.low, high = frame.high, left = AxisLeft(frame);
  const double span = AxisRight(frame) - left;
  const size_t bins = std::clamp<size_t>(seconds.size() / 2, 5, 40);
  std::vector<size_t> counts(bins, 0);
  size_t below = 0, above = 0;
  for (const double s : seconds) {
    if (s < low || s > high) {
      ++(s < low ? below : above);
      continue;
    }
    const double at = high > low ? (s - low) / (high - low) * static_cast<double>(bins) : 0;
    ++counts[std::min(static_cast<size_t>(std::max(at, 0.0)), bins - 1)];
  }
  const size_t most =
      std::max({size_t{1}, *std::max_element(counts.begin(), counts.end()), below, above});
  const double scale = height / static_cast<double>(most);
  const double width = span / static_cast<double>(bins);
  std::string out;
  for (size_t b = 0; b < bins; ++b) {
    absl::StrAppend(
        &out, Bar(left + width * static_cast<double>(b) + 1, top + height, std::max(width - 2, 1.0),
                  scale * static_cast<double>(counts[b]), colour));
  }
  absl::StrAppend(&out, EndBar(kLeft, below, scale, top + height, colour),
                  EndBar(kWidth - kRight - kSlot, above, scale, top + height, colour));
  absl::StrAppend(&out, absl::StrFormat("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                                        "stroke=\"#444\"/>\n",
                                        kLeft, top + height, kWidth - kRight, top + height));
  const double median = report::Median(seconds);
  const double x = high > low ? left + (median - low) / (high - low) * span : left;
  absl::StrAppend(&out,
                  absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                                  "stroke=\"#c00\" stroke-width=\"2\" stroke-dasharray=\"4 3\"/>\n",
                                  x, top - 4, x, top + height));
  // The label on the side of the line with the more room.
  const bool right_half = x > (kLeft + kWidth - kRight) / 2.0;
  absl::StrAppend(&out, Text(right_half ? x - 4 : x + 4, top + 8, "median " + Microseconds(median),
                             right_half ? "end" : "start", 11, " fill=\"#c00\""));
  absl::StrAppend(&out, Text(kLeft - 6, top + 12, label, "end", 11));
  absl::StrAppend(&out, Text(kLeft - 6, top + height, absl::StrCat(seconds.size(), " repeats"),
                             "end", 10, " fill=\"#666\""));
  return out;
}

// The axis's ends and name at `y`, and beneath, what the end slots hold.
std::string Axis(const Frame& f, double y) {
  std::string out =
      Text(AxisLeft(f), y, Microseconds(f.low), "start", 11) +
      Text(AxisRight(f), y, Microseconds(f.high), "end", 11) +
      Text((kLeft + kWidth - kRight) / 2.0, y, "time per call", "middle", 11, " fill=\"#666\"");
  if (f.below) {
    absl::StrAppend(&out, Text(kLeft, y + 14, "at left: far below, down to " + Microseconds(f.min),
                               "start", 10, " fill=\"#666\""));
  }
  if (f.above) {
    absl::StrAppend(
        &out, Text(kWidth - kRight, y + 14, "at right: far above, up to " + Microseconds(f.max),
                   "end", 10, " fill=\"#666\""));
  }
  return out;
}

// The extra height the axis's second line takes, when it has one.
int AxisExtra(const Frame& f) { return f.below || f.above ? 16 : 0; }

const char* Colour(report::Verdict verdict) {
  switch (verdict) {
    case report::Verdict::kFaster:
      return "#2a8a2a";
    case report::Verdict::kSlower:
      return "#c0392b";
    case report::Verdict::kSame:
      return "#555";
    case report::Verdict::kInsufficient:
    case report::Verdict::kNoisy:
      break;
  }
  return "#aaa";
}

}  // namespace

namespace {

// The finite repeats: what can be drawn.
std::vector<double> Drawable(const std::vector<double>& seconds) {
  std::vector<double> out;
  for (const double s : seconds) {
    if (std::isfinite(s)) out.push_back(s);
  }
  return out;
}

}  // namespace

std::string RepeatsSvg(const std::string& title, const std::vector<double>& all) {
  const std::vector<double> seconds = Drawable(all);
  const Frame frame = seconds.empty() ? Frame{} : FrameOf(seconds);
  std::string out = Open(300 + AxisExtra(frame));
  absl::StrAppend(&out, Text(kWidth / 2.0, 24, title, "middle", 15, " font-weight=\"bold\""));
  if (seconds.empty()) {
    absl::StrAppend(&out, Text(kWidth / 2.0, 150, "no repeats", "middle"), "</svg>\n");
    return out;
  }
  absl::StrAppend(&out, HistogramAt(seconds, frame, 50, 200, "#4a78c2", "repeats"));
  absl::StrAppend(&out, Axis(frame, 272), "</svg>\n");
  return out;
}

std::string ComparisonSvg(const std::vector<PlottedComparison>& rows, double confidence) {
  constexpr int kRow = 28, kTop = 60;
  const bool distributions =
      rows.size() == 1 && !Drawable(rows[0].base).empty() && !Drawable(rows[0].fresh).empty();
  const int chart = kTop + static_cast<int>(rows.size()) * kRow + 40;
  Frame frame;
  if (distributions) {
    std::vector<double> both = Drawable(rows[0].base);
    for (const double s : Drawable(rows[0].fresh)) both.push_back(s);
    frame = FrameOf(both);
  }
  std::string out = Open(chart + (distributions ? 330 + AxisExtra(frame) : 0));
  absl::StrAppend(&out, Text(kWidth / 2.0, 24,
                             absl::StrFormat("change of the median, new against base, with its "
                                             "%g%% interval",
                                             confidence * 100),
                             "middle", 14, " font-weight=\"bold\""));
  // The scale: symmetric about no change, wide enough for every interval shown.
  double reach = 0.01;
  for (const PlottedComparison& row : rows) {
    for (const double v :
         {row.comparison.change, row.comparison.interval.low, row.comparison.interval.high}) {
      if (std::isfinite(v)) reach = std::max(reach, std::fabs(v));
    }
  }
  reach *= 1.15;
  // The chart between the names (left) and the verdicts (right).
  constexpr double kChartLeft = kLeft + 200, kChartRight = kWidth - 130;
  const double half = (kChartRight - kChartLeft) / 2;
  const double mid = kChartLeft + half;
  const auto x_of = [&](double change) { return mid + change / reach * half; };
  absl::StrAppend(&out, absl::StrFormat("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                                        "stroke=\"#888\" stroke-dasharray=\"2 2\"/>\n",
                                        mid, kTop - 10, mid, chart - 30));
  absl::StrAppend(&out, Text(mid, chart - 14, "no change", "middle", 11, " fill=\"#666\""),
                  Text(x_of(-reach / 1.15), chart - 14,
                       absl::StrFormat("%+.1f%%", -reach / 1.15 * 100), "middle", 11),
                  Text(x_of(reach / 1.15), chart - 14,
                       absl::StrFormat("%+.1f%%", reach / 1.15 * 100), "middle", 11));
  for (size_t i = 0; i < rows.size(); ++i) {
    const report::Comparison& c = rows[i].comparison;
    const double y = kTop + static_cast<double>(i) * kRow + kRow / 2.0;
    const char* colour = Colour(c.verdict);
    absl::StrAppend(&out, Text(kLeft + 190, y + 4, rows[i].name, "end", 12));
    if (std::isfinite(c.interval.low) && std::isfinite(c.interval.high)) {
      absl::StrAppend(&out,
                      absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                                      "stroke=\"%s\" stroke-width=\"3\"/>\n",
                                      x_of(c.interval.low), y, x_of(c.interval.high), y, colour));
    }
    if (std::isfinite(c.change)) {
      absl::StrAppend(&out,
                      absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n",
                                      x_of(c.change), y, colour));
    }
    absl::StrAppend(
        &out, Text(kWidth - 8, y + 4,
                   absl::StrCat(
                       report::VerdictName(c.verdict),
                       std::isfinite(c.change) ? absl::StrFormat(" %+.2f%%", c.change * 100) : ""),
                   "end", 11, absl::StrCat(" fill=\"", colour, "\"").c_str()));
  }
  if (distributions) {
    const std::vector<double> base = Drawable(rows[0].base), fresh = Drawable(rows[0].fresh);
    absl::StrAppend(&out, Text(kWidth / 2.0, chart + 16, "the repeats of each side, on one axis",
                               "middle", 13, " font-weight=\"bold\""));
    absl::StrAppend(&out, HistogramAt(base, frame, chart + 40, 110, "#7f8fa6", "base"));
    absl::StrAppend(&out, HistogramAt(fresh, frame, chart + 180, 110,
                                      Colour(rows[0].comparison.verdict), "new"));
    absl::StrAppend(&out, Axis(frame, chart + 316));
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

}  // namespace kprof::client

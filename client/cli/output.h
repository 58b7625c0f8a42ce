// How kprof writes its results, in one place: whole strings to stdout, protobuf messages as
// JSON, reports in every format, a timing's JSON object (TVM's BenchmarkResult keys and
// kprofd's own), and the repeats' histogram line.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/message.h"
#include "kprof/v1/kprof.pb.h"
#include "nlohmann/json.hpp"
#include "report/report.h"

namespace kprof::client {

using Json = nlohmann::ordered_json;

// `text` with the control characters a terminal acts on written out ("\x1b", "\r", "\u009b"):
// ids, names, hosts and messages come from clients and daemons, and must not move the cursor,
// clear the screen or overwrite a row. Newlines, tabs and NUL bytes stay as they are.
std::string Printable(std::string_view text);

// Writes `text` to stdout whole, Printable: a report's strings may hold NUL bytes, which "%s"
// would stop at.
void Print(std::string_view text);

// Print of a printf-style format, checked as absl::StrFormat checks it.
template <typename... Args>
void PrintF(const absl::FormatSpec<Args...>& format, const Args&... args) {
  Print(absl::StrFormat(format, args...));
}

// A message as indented JSON with its fields' proto names, 64-bit integers as numbers (protobuf
// writes them as strings).
std::string ProtoJson(const google::protobuf::Message& message);

// A report in `format`: table (shaped by `table`), json, csv, trace or html.
void PrintReport(const report::Report& report, const std::string& format,
                 const report::TableOptions& table = {});

// `kprof time --format json`'s object for a result: TVM's BenchmarkResult keys (seconds) and
// kprofd's own; INVALID_ARGUMENT when its environment does not read. The members as text, for
// the lines of a batch, are WriteTimeMembers's (client/cli/time_json.h).
absl::StatusOr<Json> TimeJson(const kprof::v1::TimeEvaluateResponse& r);

// A check's verdict: {"outcome": "passed", "reference": ..., "outputs": [...], "max_abs_error",
// "max_rel_error", "check_seconds", "mismatches": [{"argument", "input", "mismatched",
// "elements", "first_index", "got", "expected", ...}]}; and as one line of a table ("check:
// passed against builtin:add (outputs 0; largest errors abs 0, rel 0; 1.204 ms)").
Json VerdictJson(const kprof::v1::CheckVerdict& verdict);
std::string VerdictLine(const kprof::v1::CheckVerdict& verdict);
// "throughput: 12.3 GB/s of 12000 bytes a call (3.2% of the device's cache peak, 384 GB/s)".
std::string ThroughputLine(const kprof::v1::Throughput& throughput);
// The verdict a failed call's status carries (a wrong answer, a reference's failure), if any.
// "Output" and what a job's worker printed, for a table; "" when it printed nothing.
std::string OutputBlock(const kprof::v1::JobOutput& output);

std::optional<kprof::v1::CheckVerdict> VerdictOf(const absl::Status& status);

// "hot; arguments at +0 (aligned 4096), +256 (aligned 256) past a page boundary": the mode and
// the placement of a TimeEvaluate, and with randomized layouts the range of their medians.
std::string PlacementLine(const kprof::v1::TimeEvaluateResponse& r);
// "clock: 2 throttled repeat(s)": what the clock did during the repeats.
std::string ClockLine(const kprof::v1::TimeEvaluateResponse& r);

// The repeats' distribution in one line: "repeats  ▁▃█▅▂  50.12 us .. 50.31 us (12 in 5 bins)",
// a bar per bin, as high as its count against the fullest's; the repeats beyond Tukey's far-out
// fences are not in the bins but counted after them ("; 1 far above, up to 412.000 us"), on a
// line of their own beneath when the line would pass 100 columns.
std::string RepeatsHistogram(const std::vector<double>& seconds);

// 3.4 ns, 812.52 us, 1.204 ms: a time in the unit that suits its size; "-" for NaN.
std::string Seconds(double s);

// "  environment: vm, AMD EPYC, 2 CPUs (--environment: all 14)\n": the manifest's gist; and
// the whole of it, a line a name, under a heading.
std::string EnvironmentLine(const report::MetricMap& manifest);
std::string EnvironmentBlock(const report::MetricMap& manifest);

// `text` in lines of at most `width` columns, broken between words (a word longer than a line
// stays whole), the first line after `first`, the others after as many spaces; each line ends
// in a newline.
std::string Wrapped(std::string_view text, std::string_view first, size_t width = 100);

}  // namespace kprof::client

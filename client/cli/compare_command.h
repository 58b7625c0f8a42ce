// kprof compare BASE NEW: which measurements of NEW are faster or slower than BASE's, by how much,
// and whether the difference is real (report/compare.h).
//
// Each file is the output of `kprof time --format json` (one measurement), `kprof batch` (JSONL,
// one per job line) or Google Benchmark's JSON (--benchmark_format=json, one per benchmark, its
// repetitions the repeats). Two files of one measurement each are compared with each other;
// otherwise measurements are matched by job id (a benchmark's name), or, when no id is in both,
// by module, function and arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "report/compare.h"

namespace kprof::client {

// One measurement read from a result file: its name, how it was called (empty when the file
// does not say), its repeats in seconds per call, or why it has none; and why its times are not
// to be judged by, when kprofd said so (it did not converge, or came with a warning).
struct Measurement {
  std::string name;
  std::string call;  // "MODULE FUNCTION ARG..." where known
  std::vector<double> seconds;
  std::string error;
  std::string noise;
};

// The measurements of a result file, in its order. INVALID_ARGUMENT naming the file (and the
// line) when it is none of the three kinds; NOT_FOUND when it cannot be read.
absl::StatusOr<std::vector<Measurement>> ReadMeasurements(const std::string& path);

struct CompareCommandOptions {
  std::string format = "table";  // table, json or csv
  report::CompareOptions compare;
  double fail_on_regression = -1;  // percent; < 0: off
  std::string plot;                // an SVG of the comparisons to write, when not empty
  bool accept_noisy = false;       // judge measurements with a noise too
};

// +3.25%: a change as a signed percentage; "-" for NaN.
std::string Percent(double change);

// A number for CSV in its shortest exact decimal; empty for NaN.
std::string CsvNumber(double v);

// Rows of cells as a table: columns as wide as their widest cell, two spaces apart, each cell
// padded on the right for the columns in `left` and on the left for the others, no trailing
// spaces; after data row r (cells[r + 1]) the note notes[r] in parentheses, when not empty,
// wrapped at 100 columns.
std::string AlignedTable(const std::vector<std::vector<std::string>>& cells,
                         const std::vector<size_t>& left, const std::vector<std::string>& notes);

// Writes `svg` to `path`; INVALID_ARGUMENT naming the file and the reason when it cannot.
absl::Status WritePlot(const std::string& path, const std::string& svg);

// Prints the comparison of the files at `base` and `fresh` to stdout. When a measurement is
// judged slower by more than `fail_on_regression` percent: FAILED_PRECONDITION naming them, and
// *exit_code 4.
absl::Status CompareFiles(const std::string& base, const std::string& fresh,
                          const CompareCommandOptions& options, int* exit_code);

}  // namespace kprof::client

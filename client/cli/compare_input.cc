// Reading result files for kprof compare and kprof rank: `kprof time --format json`, a batch's
// JSONL and Google Benchmark's JSON, each measurement's repeats and what failed.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/read_file.h"
#include "client/cli/compare_command.h"
#include "client/cli/json_input.h"
#include "nlohmann/json.hpp"

namespace kprof::client {
namespace {

using Json = nlohmann::ordered_json;

absl::Status NotResults(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", path, "' ", why,
                   ": kprof compare reads the output of `kprof time --format json` (an object with "
                   "\"results\"), `kprof batch` (JSONL, a line per job) or Google Benchmark's "
                   "--benchmark_format=json (an object with \"benchmarks\")"));
}

// A member's text, or `fallback` when it is missing or not a string (a file of the wrong shape
// is read as far as it goes, never thrown on).
std::string Text(const Json& object, const char* key, const std::string& fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// Whether a member is the boolean true.
bool IsTrue(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

// "MODULE FUNCTION ARG...", from a result's "module", "function" and "args", where it has them.
std::string CallOf(const Json& result) {
  if (!result.contains("function") || !result["function"].is_string()) return "";
  std::vector<std::string> words;
  if (result.contains("module") && result["module"].is_string()) {
    words.push_back(result["module"].get<std::string>());
  }
  words.push_back(result["function"].get<std::string>());
  if (result.contains("args") && result["args"].is_array()) {
    for (const Json& arg : result["args"]) {
      if (arg.is_string()) words.push_back(arg.get<std::string>());
    }
  }
  return absl::StrJoin(words, " ");
}

// A measurement with a time that is not positive, finite and normal (zero, negative, infinite
// and subnormal ones make ratios of inf or 0 and a test of nothing) is compared as a failed one,
// its times dropped; python/kprof/compare.py says it in the same words.
void RefuseOddTimes(Measurement& m) {
  for (size_t k = 0; k < m.seconds.size(); ++k) {
    if (m.seconds[k] > 0 && std::isnormal(m.seconds[k])) continue;
    m.error = absl::StrCat("INVALID_ARGUMENT: repeat ", k + 1, " of ", m.seconds.size(),
                           " is not a positive, finite, normal number of seconds");
    m.seconds.clear();
    return;
  }
}

// Why a result's times are not to be judged by: it did not converge, or kprofd warned about it
// (a busy host, a load or clock that moved); "" when neither.
std::string NoiseOf(const Json& result) {
  std::vector<std::string> why;
  if (result.contains("converged") && result["converged"].is_boolean() &&
      !result["converged"].get<bool>()) {
    std::string spread = "its repeats did not converge";
    if (const auto rel = result.find("rel_stddev"); rel != result.end() && rel->is_number()) {
      absl::StrAppend(&spread, " (relative std ",
                      absl::StrFormat("%.1f%%", rel->get<double>() * 100), ")");
    }
    why.push_back(spread);
  }
  if (const auto warnings = result.find("warnings");
      warnings != result.end() && warnings->is_array()) {
    for (const Json& w : *warnings) {
      if (w.is_string()) why.push_back(w.get<std::string>());
    }
  }
  return absl::StrJoin(why, "; ");
}

// A `kprof time --format json` result, or an OK line of `kprof batch`.
absl::StatusOr<Measurement> FromResult(const Json& result, const std::string& name,
                                       const std::string& where) {
  Measurement m;
  m.name =
      result.contains("id") && result["id"].is_string() ? result["id"].get<std::string>() : name;
  m.call = CallOf(result);
  if (result.contains("check") && result["check"].is_object() &&
      Text(result["check"], "outcome", "") != "passed") {
    // A wrong answer's times count for nothing (kprofd never sends them; an edited file might).
    return absl::InvalidArgumentError(absl::StrCat(where, ": its answer's check says '",
                                                   Text(result["check"], "outcome", ""),
                                                   "': a wrong answer has no time to compare"));
  }
  if (!result["results"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"results\" is not an array"));
  }
  for (const Json& seconds : result["results"]) {
    if (!seconds.is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"results\" holds ", Echo(seconds), ", not seconds per call"));
    }
    m.seconds.push_back(seconds.get<double>());
  }
  RefuseOddTimes(m);
  m.noise = NoiseOf(result);
  return m;
}

absl::StatusOr<std::vector<Measurement>> FromGoogleBenchmark(const Json& json,
                                                             const std::string& path) {
  if (!json["benchmarks"].is_array()) return NotResults(path, "has \"benchmarks\" but no array");
  std::vector<Measurement> measurements;
  std::map<std::string, size_t> index;
  for (const Json& run : json["benchmarks"]) {
    if (!run.is_object()) return NotResults(path, "holds a benchmark that is not an object");
    if (Text(run, "run_type", "iteration") == "aggregate") continue;  // mean, median, stddev
    const std::string name = run.contains("run_name") && run["run_name"].is_string()
                                 ? run["run_name"].get<std::string>()
                                 : Text(run, "name", "");
    auto [at, fresh] = index.emplace(name, measurements.size());
    if (fresh) measurements.push_back(Measurement{name, "", {}, "", ""});
    Measurement& m = measurements[at->second];
    if (IsTrue(run, "error_occurred")) {
      m.error = Text(run, "error_message", "the benchmark reported an error");
      continue;
    }
    const std::string unit = Text(run, "time_unit", "ns");
    const std::map<std::string, double> scale = {
        {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
    const auto factor = scale.find(unit);
    if (factor == scale.end() || !run.contains("real_time") || !run["real_time"].is_number()) {
      return NotResults(
          path, absl::StrCat("has a run of '", name, "' without a real_time in ns, us, ms or s"));
    }
    m.seconds.push_back(run["real_time"].get<double>() * factor->second);
  }
  for (Measurement& m : measurements) {
    if (m.error.empty()) RefuseOddTimes(m);
  }
  return measurements;
}

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::StatusOr<std::vector<Measurement>> ReadMeasurements(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is a directory, not a result file"));
  }
  absl::StatusOr<std::string> text = base::ReadFile(path, "result file");
  if (!text.ok()) return text.status();
  bool too_deep = false;
  const Json whole = ParseInput(*text, &too_deep);
  if (too_deep) {
    return NotResults(path, absl::StrCat("nests deeper than ", kMaxInputDepth, " levels"));
  }
  if (!whole.is_discarded() && whole.is_object() && whole.contains("benchmarks")) {
    return FromGoogleBenchmark(whole, path);
  }
  if (!whole.is_discarded() && whole.is_object() && !whole.contains("status")) {
    if (!whole.contains("results")) return NotResults(path, "is a JSON object without results");
    absl::StatusOr<Measurement> m = FromResult(whole, FileName(path), "'" + path + "'");
    if (!m.ok()) return m.status();
    return std::vector<Measurement>{*std::move(m)};
  }
  if (!whole.is_discarded() && !whole.is_object()) return NotResults(path, "is not an object");
  // JSONL: a line per job.
  std::vector<Measurement> measurements;
  int number = 0;
  for (const absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++number;
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    const std::string where = absl::StrCat("'", path, "' line ", number);
    const Json json = ParseInput(line, &too_deep);
    if (too_deep) {
      return NotResults(
          path, absl::StrCat("line ", number, " nests deeper than ", kMaxInputDepth, " levels"));
    }
    if (json.is_discarded() || !json.is_object()) {
      return NotResults(path, absl::StrCat("line ", number, " is not a JSON object"));
    }
    if (json.contains("ranking") && !json.contains("id")) continue;  // kprof batch --rank's last
    if (json.contains("results")) {
      absl::StatusOr<Measurement> m = FromResult(json, absl::StrCat("line ", number), where);
      if (!m.ok()) return m.status();
      measurements.push_back(*std::move(m));
    } else if (json.contains("status") && json["status"].is_string()) {
      Measurement m;
      m.name = json.contains("id") && json["id"].is_string() ? json["id"].get<std::string>()
                                                             : absl::StrCat("line ", number);
      m.error = absl::StrCat(json["status"].get<std::string>(), ": ", Text(json, "error", ""));
      measurements.push_back(std::move(m));
    } else {
      return NotResults(path, absl::StrCat("line ", number,
                                           " has neither \"results\" nor "
                                           "\"status\""));
    }
  }
  if (measurements.empty()) return NotResults(path, "holds no measurement");
  return measurements;
}

}  // namespace kprof::client

// The options of a checked measurement on the command line: --reference MODULE:FUNCTION or
// --expect FILE.npy (one per output, in order), --rtol, --atol, --outputs i,j — for `kprof time`
// and `kprof profile`; a batch line's keys (reference, expect, rtol, atol, outputs) read the same.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli/call_spec.h"
#include "kprof/v1/kprof.pb.h"
#include "nlohmann/json_fwd.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace kprof::client {

// A batch line's (and a sequence file's call's) keys of a check.
inline constexpr const char* kCheckKeys[] = {"reference", "expect", "rtol",   "atol",
                                             "outputs",   "checks", "bitwise"};

struct CheckFlags {
  std::string reference;  // MODULE:FUNCTION
  std::string checks;     // "basic" (the default) or "strict"
  bool bitwise = false;
  std::vector<std::string> expect;  // .npy files
  std::string outputs;              // "0,2"
  double rtol = 0, atol = 0;
  CLI::Option* rtol_option = nullptr;
  CLI::Option* atol_option = nullptr;

  // The check the options ask for (none without --reference or --expect); a usage error for
  // --rtol, --atol, --outputs, --checks or --bitwise alone, or for a reference that is not
  // MODULE:FUNCTION. `level_alone` (a batch's): --checks and --bitwise alone give a check with
  // no reference, the level for the lines that name their own.
  absl::StatusOr<std::optional<kprof::v1::AnswerCheck>> ToCheck(const ModuleResolver& resolve,
                                                                bool level_alone = false) const;
};

void AddCheckOptions(CLI::App& command, CheckFlags& flags);

// "MODULE:FUNCTION" (MODULE a file, a module id or builtin; split at the last colon) as a
// ReferenceCall, its module resolved.
absl::StatusOr<kprof::v1::ReferenceCall> ParseReference(const std::string& text,
                                                        const ModuleResolver& resolve);
// "basic" or "strict" as a check's level.
absl::StatusOr<kprof::v1::AnswerCheck::Level> ParseCheckLevel(const std::string& text);
// "0,2" as output indices.
absl::StatusOr<std::vector<int>> ParseOutputs(const std::string& text);

// A batch line's check: keys reference ({"module", "function"} or "MODULE:FUNCTION"), expect
// (.npy paths), rtol, atol, outputs ([0, 2]), checks ("basic" or "strict"); `fallback` (the
// batch's check) shaped by the line's other keys when it has neither reference nor expect, and
// its level and bitwise kept when the line has its own; none when neither it nor a fallback
// names one. A fallback with a level alone (no reference) and a line without one: an error.
absl::StatusOr<std::optional<kprof::v1::AnswerCheck>> CheckFromJson(
    const nlohmann::json& line, const ModuleResolver& resolve,
    const std::optional<kprof::v1::AnswerCheck>& fallback = std::nullopt);

}  // namespace kprof::client

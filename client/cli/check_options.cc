#include "client/cli/check_options.h"

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/npy_file.h"
#include "nlohmann/json.hpp"

namespace kprof::client {

void AddCheckOptions(CLI::App& command, CheckFlags& flags) {
  command.add_option("--reference", flags.reference,
                     "check the answer against MODULE:FUNCTION (a file, an id or builtin) run "
                     "on the same arguments; a wrong answer fails (exit 1)");
  command.add_option("--expect", flags.expect,
                     "check the answer against FILE.npy (one per output, in order)");
  flags.rtol_option = command.add_option("--rtol", flags.rtol,
                                         "relative tolerance of the check (per type by default)");
  flags.atol_option = command.add_option("--atol", flags.atol,
                                         "absolute tolerance of the check (per type by default)");
  command.add_option("--outputs", flags.outputs,
                     "the output arguments, i,j (default: those the reference changes)");
  command.add_option("--checks", flags.checks,
                     "basic (the default: the first call, on the call's data) or strict (for "
                     "candidates no one reviewed: secret inputs, checks among the timed repeats; "
                     "with --reference, or a batch's lines' own)");
  command.add_flag("--bitwise", flags.bitwise,
                   "with --checks strict: checked calls on the same inputs must agree bit for bit");
}

absl::StatusOr<kprof::v1::AnswerCheck::Level> ParseCheckLevel(const std::string& text) {
  if (text == "basic") return kprof::v1::AnswerCheck::BASIC;
  if (text == "strict") return kprof::v1::AnswerCheck::STRICT;
  return absl::InvalidArgumentError(
      absl::StrCat("checks '", text, "' is not a level of checking (accepted: basic, strict)"));
}

absl::StatusOr<kprof::v1::ReferenceCall> ParseReference(const std::string& text,
                                                        const ModuleResolver& resolve) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reference '", text, "' is not MODULE:FUNCTION (e.g. builtin:add, kernels.so:my_add)"));
  }
  kprof::v1::ReferenceCall reference;
  KPROF_ASSIGN_OR_RETURN(*reference.mutable_module_id(), resolve(text.substr(0, colon)));
  reference.set_function(text.substr(colon + 1));
  return reference;
}

absl::StatusOr<std::vector<int>> ParseOutputs(const std::string& text) {
  std::vector<int> outputs;
  for (absl::string_view word : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int k = 0;
    if (!absl::SimpleAtoi(word, &k) || k < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs '", text, "': '", word, "' is not an argument index (0, 1, ...; e.g. 0,2)"));
    }
    outputs.push_back(k);
  }
  return outputs;
}

absl::StatusOr<std::optional<kprof::v1::AnswerCheck>> CheckFlags::ToCheck(
    const ModuleResolver& resolve, bool level_alone) const {
  const bool shaped = rtol_option->count() > 0 || atol_option->count() > 0 || !outputs.empty();
  const bool leveled = !checks.empty() || bitwise;
  if (reference.empty() && expect.empty() && (shaped || (leveled && !level_alone))) {
    return UsageError(
        "--rtol, --atol, --outputs, --checks and --bitwise shape a check: give --reference "
        "MODULE:FUNCTION or --expect FILE.npy with them");
  }
  if (reference.empty() && expect.empty() && !leveled) return std::nullopt;
  kprof::v1::AnswerCheck check;  // with a level alone, a batch's for the lines' own references
  if (!checks.empty()) {
    const absl::StatusOr<kprof::v1::AnswerCheck::Level> level = ParseCheckLevel(checks);
    if (!level.ok()) return UsageError(level.status().message());
    check.set_level(*level);
  }
  check.set_bitwise(bitwise);
  if (!reference.empty()) {
    KPROF_ASSIGN_OR_RETURN(*check.mutable_reference(), ParseReference(reference, resolve));
  }
  for (const std::string& path : expect) {
    KPROF_ASSIGN_OR_RETURN(*check.add_expected(), ReadNpyFile(path));
  }
  if (rtol_option->count() > 0) check.set_rtol(rtol);
  if (atol_option->count() > 0) check.set_atol(atol);
  KPROF_ASSIGN_OR_RETURN(const std::vector<int> indices, ParseOutputs(outputs));
  for (int k : indices) check.add_outputs(k);
  return check;
}

absl::StatusOr<std::optional<kprof::v1::AnswerCheck>> CheckFromJson(
    const nlohmann::json& line, const ModuleResolver& resolve,
    const std::optional<kprof::v1::AnswerCheck>& fallback) {
  const bool has_reference = line.contains("reference"), has_expect = line.contains("expect");
  const bool fallback_checks =
      fallback.has_value() && (fallback->has_reference() || fallback->expected_size() > 0);
  if (!has_reference && !has_expect && fallback.has_value() && !fallback_checks) {
    return absl::InvalidArgumentError(
        "the batch's --checks and --bitwise are for lines with a 'reference' of their own: give "
        "this line one, or give the batch --reference");
  }
  if (!has_reference && !has_expect && !fallback.has_value()) {
    for (const char* key : kCheckKeys) {
      if (line.contains(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", key, "' shapes a check: give 'reference' or 'expect' with it"));
      }
    }
    return std::nullopt;
  }
  // A line without a reference of its own shapes the batch's check.
  kprof::v1::AnswerCheck check = has_reference || has_expect ? kprof::v1::AnswerCheck() : *fallback;
  if ((has_reference || has_expect) && fallback.has_value()) {
    // How hard the batch checks holds for a line's own reference too.
    check.set_level(fallback->level());
    check.set_bitwise(fallback->bitwise());
  }
  try {
    if (has_reference) {
      const nlohmann::json& r = line.at("reference");
      if (r.is_string()) {
        KPROF_ASSIGN_OR_RETURN(*check.mutable_reference(),
                               ParseReference(r.get<std::string>(), resolve));
      } else if (r.is_object() && r.contains("module") && r.contains("function")) {
        KPROF_ASSIGN_OR_RETURN(*check.mutable_reference()->mutable_module_id(),
                               resolve(r.at("module").get<std::string>()));
        check.mutable_reference()->set_function(r.at("function").get<std::string>());
      } else {
        return absl::InvalidArgumentError(
            "'reference' is neither \"MODULE:FUNCTION\" nor {\"module\": ..., \"function\": ...}");
      }
    }
    if (has_expect) {
      for (const auto& path : line.at("expect")) {
        KPROF_ASSIGN_OR_RETURN(*check.add_expected(), ReadNpyFile(path.get<std::string>()));
      }
    }
    if (line.contains("rtol")) check.set_rtol(line.at("rtol").get<double>());
    if (line.contains("atol")) check.set_atol(line.at("atol").get<double>());
    if (line.contains("outputs")) {
      check.clear_outputs();
      for (const auto& k : line.at("outputs")) check.add_outputs(k.get<int>());
    }
    if (line.contains("bitwise")) check.set_bitwise(line.at("bitwise").get<bool>());
    if (line.contains("checks")) {
      KPROF_ASSIGN_OR_RETURN(const kprof::v1::AnswerCheck::Level level,
                             ParseCheckLevel(line.at("checks").get<std::string>()));
      check.set_level(level);
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the check's keys (reference, expect, rtol, atol, outputs, checks, bitwise): ", e.what()));
  }
  return check;
}

}  // namespace kprof::client

// The cheating kernels of tests/modules/cheats.c and the check that refuses each under strict
// checking: what the failure's message says (alternatives split by '|'). One table for every
// way in (the C++ client, the CLI's time and batch); python/tests/test_check.py has its own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "kprof/v1/check.pb.h"

namespace kprof::testing {

struct Cheat {
  const char* function;
  const char* why;
};

inline const std::vector<Cheat>& CheatKit() {
  static const auto* const kit = new std::vector<Cheat>{
      {"add_remembers", "wrong answer: function 'add_remembers', checked repeat"},
      {"add_skips_familiar", "wrong answer: function 'add_skips_familiar', checked repeat"},
      {"add_first_calls", "wrong answer: function 'add_first_calls', checked repeat"},
      {"add_when_changed", "wrong answer: function 'add_when_changed', checked repeat"},
      {"add_in_thread", "thread(s) still running when it returned"},
      // Its kept thread finishes each call's work after the return; when the work of the call
      // before a check lands after the poison, the check sees a right answer, and the thread
      // the job leaves running fails it.
      {"add_in_pool", "changed after the call returned|left 1 thread(s) running"},
      {"add_reads_stale", "wrong answer: function 'add_reads_stale', checked repeat"},
      {"add_zeroes_inputs", "wrote its input argument 1 (the reference leaves it as it is)"},
      {"heavy_remembers", "seeing the same inputs again"}};
  return *kit;
}

// Matches a message that says why `cheat` was refused.
inline ::testing::Matcher<std::string> Refuses(const Cheat& cheat) {
  std::vector<::testing::Matcher<std::string>> whys;
  for (absl::string_view why : absl::StrSplit(cheat.why, '|')) {
    whys.push_back(::testing::HasSubstr(std::string(why)));
  }
  return ::testing::AnyOfArray(whys);
}

// The verdict a failed call's status carries as its detail, if any.
inline std::optional<v1::CheckVerdict> VerdictOf(const absl::Status& status) {
  const auto payload = status.GetPayload("type.googleapis.com/kprof.v1.CheckVerdict");
  v1::CheckVerdict verdict;
  if (!payload.has_value() || !verdict.ParseFromString(std::string(*payload))) return std::nullopt;
  return verdict;
}

}  // namespace kprof::testing

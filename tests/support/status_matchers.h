// gMock matchers for absl::Status and absl::StatusOr, which Debian 12's Abseil lacks.
//
//   EXPECT_THAT(ReportFromJson("[]"), StatusIs(absl::StatusCode::kInvalidArgument,
//                                              HasSubstr("expected an object")));
//   ASSERT_THAT(result, IsOk());
#pragma once

#include <ostream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace kprof::testing {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

MATCHER(IsOk, negation ? "is not OK" : "is OK") {
  const absl::Status& status = GetStatus(arg);
  if (!status.ok()) *result_listener << "status is " << status;
  return status.ok();
}

MATCHER_P2(StatusIs, code, message_matcher,
           std::string(negation ? "isn't" : "is") + " a status with code " +
               absl::StatusCodeToString(code) + " and a message that " +
               ::testing::DescribeMatcher<std::string>(message_matcher, negation)) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code && ::testing::Matches(::testing::Matcher<std::string>(
                                      message_matcher))(std::string(status.message()));
}

// An OK StatusOr whose value matches `matcher`.
MATCHER_P(IsOkAndHolds, matcher, "is OK and holds a value that matches") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(matcher, *arg, result_listener);
}

MATCHER_P(StatusIs, code,
          std::string(negation ? "isn't" : "is") + " a status with code " +
              absl::StatusCodeToString(code)) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code;
}

}  // namespace kprof::testing

// kprofd end to end: checked measurements — a time only for a right answer. Honest candidates
// pass for every element type; each cheating kernel of tests/modules/answers.c is refused,
// naming why; tolerances hold at their edges; a reference's failures are its own errors.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "proto/status.h"
#include "service_fixture.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::ServiceTest;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kVerdictType[] = "type.googleapis.com/kprof.v1.CheckVerdict";

class CheckTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    LoadAnswers();
  }
  void LoadAnswers() {
    auto loaded = client_->LoadModule(ReadFileBytes(TestModulePath("answers")), "answers.so");
    ASSERT_THAT(loaded, IsOk());
    answers_ = loaded->id();
  }

  // c = a + b over float32[n], checked against answers.so's add_ref.
  v1::TimeEvaluateRequest Add(const std::string& function, int n = 4096) {
    const std::string vec = absl::StrCat("float32[", n, "]");
    v1::TimeEvaluateRequest request =
        Time(answers_, function, {vec, vec + ":random", vec + ":random"});
    request.set_repeat(3);
    request.set_seed(11);
    request.mutable_check()->mutable_reference()->set_module_id(answers_);
    request.mutable_check()->mutable_reference()->set_function("add_ref");
    return request;
  }

  static v1::CheckVerdict VerdictOf(const absl::Status& status) {
    v1::CheckVerdict verdict;
    const auto payload = status.GetPayload(kVerdictType);
    EXPECT_TRUE(payload.has_value()) << status;
    if (payload.has_value()) {
      EXPECT_TRUE(verdict.ParseFromString(std::string(*payload)));
    }
    return verdict;
  }

  std::string answers_;
};

TEST_F(CheckTest, HonestCandidatePassesWithItsVerdictAndReusesTheReference) {
  auto first = client_->TimeEvaluate(Add("add_honest"));
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->seconds_per_call_size(), 3);
  EXPECT_EQ(first->check().outcome(), v1::CheckVerdict::PASSED);
  EXPECT_THAT(first->check().outputs(), ElementsAre(0));
  EXPECT_EQ(first->check().max_abs_error(), 0);
  EXPECT_GT(first->check().check_seconds(), 0);
  EXPECT_FALSE(first->check().reference_reused());
  EXPECT_EQ(first->check().reference(), absl::StrCat(answers_.substr(0, 12), ":add_ref"));
  auto second = client_->TimeEvaluate(Add("add_honest"));
  ASSERT_THAT(second, IsOk());
  EXPECT_TRUE(second->check().reference_reused());
  // Another seed is other data: the reference runs again.
  v1::TimeEvaluateRequest reseeded = Add("add_honest");
  reseeded.set_seed(12);
  auto third = client_->TimeEvaluate(reseeded);
  ASSERT_THAT(third, IsOk());
  EXPECT_FALSE(third->check().reference_reused());
}

TEST_F(CheckTest, EveryCheatingCandidateIsRefusedNamingWhy) {
  struct Case {
    const char* function;
    const char* why;
    int argument;
    bool input;
  };
  for (const Case& c :
       std::vector<Case>{{"add_nothing", "argument 0: 4096 of 4096 elements differ", 0, false},
                         {"add_half", "argument 0: 2048 of 4096 elements differ", 0, false},
                         {"add_minus", "argument 0:", 0, false},
                         {"add_one_nan", "first at index 1365: got nan", 0, false},
                         {"add_off", "argument 0: 4096 of 4096 elements differ", 0, false},
                         {"add_writes_input", "wrote its input argument 1", 1, true},
                         {"add_zeroes_all", "wrote its input argument 1", 0, false}}) {
    SCOPED_TRACE(c.function);
    auto result = client_->TimeEvaluate(Add(c.function));
    ASSERT_THAT(result.status(), StatusIs(absl::StatusCode::kAborted, HasSubstr("wrong answer")));
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(c.why));
    EXPECT_THAT(std::string(result.status().message()),
                HasSubstr(absl::StrCat("function '", c.function, "'")));
    const v1::CheckVerdict verdict = VerdictOf(result.status());
    EXPECT_EQ(verdict.outcome(), v1::CheckVerdict::WRONG);
    ASSERT_GE(verdict.mismatches_size(), 1);
    EXPECT_EQ(verdict.mismatches(0).argument(), c.argument);
    EXPECT_EQ(verdict.mismatches(0).input(), c.input);
  }
}

TEST_F(CheckTest, HonestCandidateIsNeverRefusedOverManyRunsAndSeeds) {
  for (int i = 0; i < 40; ++i) {
    v1::TimeEvaluateRequest request = Add("add_honest", 1000 + 37 * i);
    request.set_seed(static_cast<uint64_t>(i));
    request.set_repeat(1);
    auto result = client_->TimeEvaluate(request);
    ASSERT_THAT(result, IsOk()) << "run " << i;
    EXPECT_EQ(result->check().outcome(), v1::CheckVerdict::PASSED);
  }
}

TEST_F(CheckTest, EveryElementTypePassesHonestAndFailsWrongAgainstABuiltin) {
  for (const char* type : {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                           "uint64", "float16", "bfloat16", "float32", "float64"}) {
    SCOPED_TRACE(type);
    for (const char* function : {"copy_honest", "copy_wrong"}) {
      v1::TimeEvaluateRequest request = Time(
          answers_, function, {absl::StrCat(type, "[333]"), absl::StrCat(type, "[333]:random")});
      request.mutable_check()->mutable_reference()->set_module_id("builtin");
      request.mutable_check()->mutable_reference()->set_function("copy");
      auto result = client_->TimeEvaluate(request);
      if (std::strcmp(function, "copy_honest") == 0) {
        ASSERT_THAT(result, IsOk());
        EXPECT_EQ(result->check().outcome(), v1::CheckVerdict::PASSED);
        EXPECT_EQ(result->check().reference(), "builtin:copy");
      } else {
        ASSERT_THAT(result.status(), StatusIs(absl::StatusCode::kAborted,
                                              HasSubstr("argument 0: 1 of 333 elements differ")));
        EXPECT_EQ(VerdictOf(result.status()).mismatches(0).first_index(), 332);
      }
    }
  }
}

TEST_F(CheckTest, TolerancesHoldAtTheirEdgeOnEachSide) {
  for (const char* type : {"float32", "float64"}) {
    SCOPED_TRACE(type);
    const double eps = 1.0 / 64;  // exact in both types
    for (const double atol : {eps * 1.1, eps * 0.9}) {
      v1::TimeEvaluateRequest request =
          Time(answers_, "offset_by",
               {absl::StrCat(type, "[512]"), absl::StrCat(type, "[512]:random"),
                absl::StrCat("float64:", eps)});
      request.mutable_check()->mutable_reference()->set_module_id(answers_);
      request.mutable_check()->mutable_reference()->set_function("offset_ref");
      request.mutable_check()->set_rtol(0);
      request.mutable_check()->set_atol(atol);
      auto result = client_->TimeEvaluate(request);
      if (atol > eps) {
        ASSERT_THAT(result, IsOk());
        EXPECT_NEAR(result->check().max_abs_error(), eps, eps * 0.05);
      } else {
        ASSERT_THAT(result.status(),
                    StatusIs(absl::StatusCode::kAborted,
                             HasSubstr("512 of 512 elements differ beyond rtol 0, atol")));
      }
    }
  }
  // The float32 default (rtol 1e-4, atol 1e-5) refuses an error of 1e-3; an atol of 2e-3 takes
  // it.
  v1::TimeEvaluateRequest loose = Add("add_off");
  loose.mutable_check()->set_atol(2e-3);
  auto result = client_->TimeEvaluate(loose);
  ASSERT_THAT(result, IsOk());
  EXPECT_NEAR(result->check().max_abs_error(), 1e-3, 1e-4);
}

TEST_F(CheckTest, NamedOutputsAndExpectedData) {
  // builtin fill writes argument 0: expected data of 16 × 2.5.
  v1::TimeEvaluateRequest request = Time("builtin", "fill", {"float32[16]", "float64:2.5"});
  v1::ExpectedOutput* expected = request.mutable_check()->add_expected();
  expected->set_dtype("float32");
  expected->add_shape(16);
  std::vector<float> values(16, 2.5f);
  expected->set_data(std::string(reinterpret_cast<const char*>(values.data()), 64));
  auto passed = client_->TimeEvaluate(request);
  ASSERT_THAT(passed, IsOk());
  EXPECT_EQ(passed->check().reference(), "expected data");
  EXPECT_THAT(passed->check().outputs(), ElementsAre(0));

  values[5] = 2.0f;
  expected->set_data(std::string(reinterpret_cast<const char*>(values.data()), 64));
  EXPECT_THAT(
      client_->TimeEvaluate(request).status(),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("first at index 5: got 2.5, expected 2")));

  expected->set_dtype("float64");
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected output 0 is float64[16]; output argument 0 is "
                                 "'float32[16]'")));
  expected->set_dtype("float32");
  expected->set_shape(0, 15);
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(15 elements)")));
  expected->set_shape(0, 16);
  expected->set_data("short");
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds 5 bytes")));
  request.mutable_check()->add_expected()->CopyFrom(*expected);
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("2 expected output(s) for 1 output argument(s)")));
}

TEST_F(CheckTest, ReferenceFailuresAreTheirOwnErrors) {
  v1::TimeEvaluateRequest request = Add("add_honest");
  request.mutable_check()->mutable_reference()->set_function("add_fails");
  auto failed = client_->TimeEvaluate(request);
  ASSERT_THAT(failed.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the reference " + answers_.substr(0, 12) +
                                 ":add_fails failed, so function 'add_honest' was not judged")));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("returned 7"));
  EXPECT_EQ(VerdictOf(failed.status()).outcome(), v1::CheckVerdict::REFERENCE_FAILED);

  request.mutable_check()->mutable_reference()->set_function("add_idle");
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("changed none of the 3 arguments")));
  request.mutable_check()->add_outputs(0);  // named, its output is the zeros it left
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("wrong answer")));

  request.mutable_check()->clear_outputs();
  request.mutable_check()->mutable_reference()->set_function("no_such_function");
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no_such_function")));
  request.mutable_check()->mutable_reference()->set_module_id(std::string(64, 'a'));
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("reference aaaaaaaaaaaa")));

  request.mutable_check()->clear_reference();
  EXPECT_THAT(
      client_->TimeEvaluate(request).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a check without a reference")));
  request.mutable_check()->mutable_reference()->set_module_id(answers_);
  request.mutable_check()->mutable_reference()->set_function("add_ref");
  request.mutable_check()->add_outputs(3);
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output 3 is no argument")));
  request.mutable_check()->clear_outputs();
  request.mutable_check()->set_rtol(-1);
  EXPECT_THAT(
      client_->TimeEvaluate(request).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rtol -1 is not a tolerance")));
}

TEST_F(CheckTest, KeptOutputsServeOnlyWhileTheReferenceIsHeld) {
  // A client that keeps no bytes to upload again: it sees what the daemon says.
  client::ClientOptions options;
  options.max_remembered_bytes = 0;
  auto forgetful = client::Client::Connect(daemon_.target(), options);
  ASSERT_THAT(forgetful, IsOk());
  auto reference = (*forgetful)->LoadModule(ReadFileBytes(TestModulePath("add_honest")), "ref.so");
  ASSERT_THAT(reference, IsOk());
  // The newest module's bytes stay remembered, however small the limit: one after it.
  ASSERT_THAT((*forgetful)->LoadModule(ReadFileBytes(TestModulePath("vector_add")), "v.so"),
              IsOk());
  v1::TimeEvaluateRequest request = Add("add_honest");
  request.mutable_check()->mutable_reference()->set_module_id(reference->id());
  request.mutable_check()->mutable_reference()->set_function("add");
  auto held = (*forgetful)->TimeEvaluate(request);
  ASSERT_THAT(held, IsOk());
  ASSERT_THAT((*forgetful)->UnloadModule(reference->id()), IsOk());
  auto unheld = (*forgetful)->TimeEvaluate(request);
  EXPECT_THAT(unheld.status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("reference " + reference->id().substr(0, 12) + ":add: ")));
  EXPECT_EQ(wire::MissingModule(unheld.status()), reference->id());  // a client uploads it again
  // ... as the client that remembers its bytes does, and the check goes on.
  ASSERT_THAT(client_->LoadModule(ReadFileBytes(TestModulePath("add_honest")), "ref.so"), IsOk());
  ASSERT_THAT(client_->UnloadModule(reference->id()), IsOk());
  EXPECT_THAT(client_->TimeEvaluate(request), IsOk());
}

TEST_F(CheckTest, ACrashingReferenceIsNamedAndTheDaemonServesOn) {
  auto faults = client_->LoadModule(ReadFileBytes(TestModulePath("faults")), "faults.so");
  ASSERT_THAT(faults, IsOk());
  v1::TimeEvaluateRequest request = Add("add_honest");
  request.mutable_check()->mutable_reference()->set_module_id(faults->id());
  request.mutable_check()->mutable_reference()->set_function("segfault");
  auto crashed = client_->TimeEvaluate(request);
  ASSERT_THAT(crashed.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("reference 'segfault' crashed")));
  EXPECT_THAT(client_->TimeEvaluate(Add("add_honest")), IsOk());
}

TEST_F(CheckTest, AKernelOfKnownCostKeepsItsTimeWhenChecked) {
  v1::TimeEvaluateRequest request =
      Time(answers_, "spin_then_fill", {"float32[512]", "float64:300"});
  request.set_repeat(5);
  request.mutable_check()->mutable_reference()->set_module_id(answers_);
  request.mutable_check()->mutable_reference()->set_function("spin_then_fill");
  auto result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->check().outcome(), v1::CheckVerdict::PASSED);
  EXPECT_GE(result->statistics().min(), 300e-6);
  EXPECT_LT(result->statistics().median(), 300e-6 * 3);  // a loaded host's margin
}

TEST_F(CheckTest, AReferenceThatDoesNotFitTheArgumentsOrHangsIsNamed) {
  // builtin saxpy takes y, x and a float32 scalar: not add's three vectors.
  v1::TimeEvaluateRequest request = Add("add_honest");
  request.mutable_check()->mutable_reference()->set_module_id("builtin");
  request.mutable_check()->mutable_reference()->set_function("saxpy");
  auto misfit = client_->TimeEvaluate(request);
  ASSERT_THAT(misfit.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the reference builtin:saxpy failed, so function 'add_honest' "
                                 "was not judged: INVALID_ARGUMENT")));

  daemon_.Stop();
  StartDaemon({"--job-timeout", "2s"});
  LoadAnswers();
  // The candidate's worker and the reference worker started, and the module loaded, first: on a
  // loaded host that alone may take a good part of a job's 2 s.
  ASSERT_THAT(client_->TimeEvaluate(Add("add_honest")), IsOk());
  request = Add("add_honest");
  request.mutable_check()->mutable_reference()->set_function("add_hangs");
  auto hung = client_->TimeEvaluate(request);
  ASSERT_THAT(hung.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr(":add_hangs failed, so function 'add_honest' was "
                                                "not judged: DEADLINE_EXCEEDED")));
  EXPECT_THAT(client_->TimeEvaluate(Add("add_honest")), IsOk());  // the daemon serves on
}

TEST_F(CheckTest, ProfileFunctionIsCheckedToo) {
  v1::ProfileFunctionRequest request;
  *request.mutable_call() = Add("add_minus").call();
  *request.mutable_check() = Add("add_minus").check();
  EXPECT_THAT(client_->ProfileFunction(request).status(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("wrong answer")));
  request.mutable_call()->set_function("add_honest");
  auto passed = client_->ProfileFunction(request);
  ASSERT_THAT(passed, IsOk());
  EXPECT_EQ(passed->check().outcome(), v1::CheckVerdict::PASSED);
}

// A profile's calls are checked each on its own data (seed + i), unchecked calls between them;
// one wrong call fails the profile, naming the call.
TEST_F(CheckTest, AProfilesCallsAreCheckedEachOnItsOwnData) {
  v1::ProfileRequest request;
  request.set_seed(5);
  *request.add_calls() = Add("add_honest").call();
  *request.add_checks() = Add("add_honest").check();
  v1::FunctionCall* copy = request.add_calls();
  copy->set_module_id("builtin");
  copy->set_function("copy");
  copy->add_args("float32[64]");
  copy->add_args("float32[64]:random");
  request.add_checks();  // empty: unchecked
  *request.add_calls() = Add("add_honest").call();
  *request.add_checks() = Add("add_honest").check();
  auto passed = client_->Profile(request);
  ASSERT_THAT(passed, IsOk());
  ASSERT_EQ(passed->checks_size(), 2);
  EXPECT_EQ(passed->checks(0).call(), 0u);
  EXPECT_EQ(passed->checks(1).call(), 2u);
  for (const v1::CheckVerdict& verdict : passed->checks()) {
    EXPECT_EQ(verdict.outcome(), v1::CheckVerdict::PASSED);
    EXPECT_FALSE(verdict.reference_reused());  // calls 0 and 2 have data of their own
  }
  EXPECT_EQ(passed->report().calls_size(), 3);

  request.mutable_calls(2)->set_function("add_half");
  auto wrong = client_->Profile(request);
  ASSERT_THAT(wrong.status(),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("wrong answer: call 2 (function 'add_half') against")));
  const v1::CheckVerdict verdict = VerdictOf(wrong.status());
  EXPECT_EQ(verdict.call(), 2u);
  EXPECT_EQ(verdict.outcome(), v1::CheckVerdict::WRONG);
  EXPECT_TRUE(verdict.reference_reused());  // the same data as the passed profile's call 2

  request.add_checks();
  request.add_checks();
  EXPECT_THAT(client_->Profile(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("5 checks for 3 calls")));
  request.mutable_checks()->DeleteSubrange(3, 2);
  request.mutable_checks(2)->set_rtol(-1);
  EXPECT_THAT(client_->Profile(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("checks[2]: "), HasSubstr("rtol"))));
}

}  // namespace
}  // namespace kprof

// CheckPlan on literal arguments: the outputs by each rule, the reference's run, and the
// verdicts — passed, wrong, an input written, nothing to compare.
#include "server/front/service/check_plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::server {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

v1::FunctionCall Call() {
  v1::FunctionCall call;
  call.set_module_id("builtin");
  call.set_function("f");
  call.add_args("float32[2]");
  call.add_args("float32[2]:random");
  return call;
}

// Arguments as a worker sends them back: their bytes one after the other.
worker::v1::WorkerAnswer Answer(const std::vector<std::string>& args) {
  worker::v1::WorkerAnswer answer;
  for (const std::string& a : args) {
    answer.mutable_arguments()->add_sizes(a.size());
    *answer.mutable_argument_bytes() += a;
  }
  return answer;
}

ReferenceData Reference(const std::vector<std::string>& args, std::vector<bool> changed) {
  worker::v1::WorkerAnswer answer = Answer(args);
  for (bool c : changed) answer.mutable_arguments()->add_changed(c);
  return ReferenceData::FromAnswer(answer);
}

v1::AnswerCheck Against(const std::string& function) {
  v1::AnswerCheck check;
  check.mutable_reference()->set_module_id("builtin");
  check.mutable_reference()->set_function(function);
  return check;
}

TEST(CheckPlan, OutputsAreWhatTheReferenceChanged) {
  auto plan = CheckPlan::Make(Against("g"), Call());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->reference_name(), "builtin:g");
  EXPECT_EQ(plan->ReferenceRun(Call()).function(), "g");
  EXPECT_EQ(plan->ReferenceRun(Call()).args_size(), 2);
  const ReferenceData ref = Reference({Floats({3, 4}), Floats({1, 2})}, {true, false});
  v1::CheckVerdict passed;
  EXPECT_THAT(plan->Judge(ref, Answer({Floats({3, 4}), Floats({1, 2})}), "function 'f'", &passed),
              IsOk());
  EXPECT_EQ(passed.outcome(), v1::CheckVerdict::PASSED);
  EXPECT_THAT(passed.outputs(), ElementsAre(0));

  v1::CheckVerdict wrong;
  EXPECT_THAT(
      plan->Judge(ref, Answer({Floats({3, 5}), Floats({1, 2})}), "function 'f'", &wrong),
      StatusIs(absl::StatusCode::kAborted,
               HasSubstr("wrong answer: function 'f' against builtin:g: argument 0: 1 of 2 "
                         "elements differ beyond rtol 0.0001, atol 1e-05; first at index 1: "
                         "got 5, expected 4")));
  EXPECT_EQ(wrong.outcome(), v1::CheckVerdict::WRONG);

  v1::CheckVerdict written;
  EXPECT_THAT(plan->Judge(ref, Answer({Floats({3, 4}), Floats({1, 0})}), "function 'f'", &written),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("wrote its input argument 1 (1 of 2 elements changed; first at "
                                 "index 1: 2 became 0)")));
  ASSERT_EQ(written.mismatches_size(), 1);
  EXPECT_TRUE(written.mismatches(0).input());

  v1::CheckVerdict none;
  EXPECT_THAT(plan->Judge(Reference({Floats({0, 0}), Floats({1, 2})}, {false, false}),
                          Answer({Floats({0, 0}), Floats({1, 2})}), "function 'f'", &none),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("changed none")));
}

// Arguments a candidate's call left as they were come back unsent: their bytes are the initial
// data, taken from the reference's run (its initial bytes of what it changed).
TEST(CheckPlan, UnsentArgumentsAreJudgedAsTheirInitialData) {
  auto plan = CheckPlan::Make(Against("g"), Call());
  ASSERT_THAT(plan, IsOk());
  worker::v1::WorkerAnswer run = Answer({Floats({3, 4}), Floats({1, 2})});
  run.mutable_arguments()->add_changed(true);
  run.mutable_arguments()->add_changed(false);
  run.mutable_arguments()->add_initial(0);
  *run.mutable_argument_bytes() += Floats({0, 0});
  const ReferenceData ref = ReferenceData::FromAnswer(run);
  ASSERT_TRUE(ref.Initial(0).has_value());
  EXPECT_EQ(*ref.Initial(0), Floats({0, 0}));
  EXPECT_EQ(*ref.Initial(1), Floats({1, 2}));

  // The output sent, the input left out: passed.
  worker::v1::WorkerAnswer right = Answer({Floats({3, 4})});
  right.mutable_arguments()->add_sizes(8);
  right.mutable_arguments()->add_unsent(false);
  right.mutable_arguments()->add_unsent(true);
  v1::CheckVerdict passed;
  EXPECT_THAT(plan->Judge(ref, right, "function 'f'", &passed), IsOk());
  EXPECT_EQ(passed.outcome(), v1::CheckVerdict::PASSED);

  // Nothing written: both left out, the output judged as its initial zeros, element by element.
  worker::v1::WorkerAnswer idle;
  idle.mutable_arguments()->add_sizes(8);
  idle.mutable_arguments()->add_sizes(8);
  idle.mutable_arguments()->add_unsent(true);
  idle.mutable_arguments()->add_unsent(true);
  v1::CheckVerdict wrong;
  EXPECT_THAT(plan->Judge(ref, idle, "function 'f'", &wrong),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("argument 0: 2 of 2 elements differ beyond rtol 0.0001, atol "
                                 "1e-05; first at index 0: got 0, expected 3")));

  // A reference's run that kept no initial data of what it changed cannot stand in.
  const ReferenceData bare = Reference({Floats({3, 4}), Floats({1, 2})}, {true, false});
  EXPECT_FALSE(bare.Initial(0).has_value());
  v1::CheckVerdict internal;
  EXPECT_THAT(plan->Judge(bare, idle, "function 'f'", &internal),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("argument 0 came back as it was")));
}

TEST(CheckPlan, ExpectedDataTakeTheUninitialisedTensorsAsOutputs) {
  v1::AnswerCheck check;
  v1::ExpectedOutput* e = check.add_expected();
  e->set_dtype("float32");
  e->add_shape(2);
  e->set_data(Floats({7, 8}));
  auto plan = CheckPlan::Make(check, Call());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->reference_name(), "expected data");
  EXPECT_TRUE(plan->ReferenceRun(Call()).function().empty());  // the initial data only
  v1::CheckVerdict verdict;
  EXPECT_THAT(plan->Judge(Reference({Floats({0, 0}), Floats({1, 2})}, {false, false}),
                          Answer({Floats({7, 8}), Floats({1, 2})}), "function 'f'", &verdict),
              IsOk());
  EXPECT_THAT(verdict.outputs(), ElementsAre(0));
}

TEST(CheckPlan, BadChecksAreRefusedNamingWhatIsWrong) {
  v1::AnswerCheck both = Against("g");
  both.add_expected();
  EXPECT_THAT(CheckPlan::Make(both, Call()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("give one")));
  EXPECT_THAT(
      CheckPlan::Make(v1::AnswerCheck(), Call()).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a check without a reference")));
  v1::AnswerCheck twice = Against("g");
  twice.add_outputs(1);
  twice.add_outputs(1);
  EXPECT_THAT(CheckPlan::Make(twice, Call()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output 1 is named twice")));
  v1::AnswerCheck nan_tolerance = Against("g");
  nan_tolerance.set_atol(std::nan(""));
  EXPECT_THAT(
      CheckPlan::Make(nan_tolerance, Call()).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("atol nan is not a tolerance")));
}

}  // namespace
}  // namespace kprof::server

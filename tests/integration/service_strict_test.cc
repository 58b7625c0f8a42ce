// kprofd end to end: strict checks. Each cheating kernel of tests/modules/cheats.c is refused
// through a real daemon, naming the check it failed; honest kernels of several element types
// and sizes, hot and cold, pass every strict run; strict options that cannot hold are refused;
// a daemon that requires strict checks refuses the rest; a strict batch of 200 candidates, some
// cheating, beside another client's honest ones.
#include <atomic>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cheat_kit.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "service_fixture.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Cheat;
using ::kprof::testing::CheatKit;
using ::kprof::testing::IsOk;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::Refuses;
using ::kprof::testing::ServiceTest;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::kprof::testing::VerdictOf;
using ::testing::Contains;
using ::testing::Each;
using ::testing::HasSubstr;

class StrictCheckTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    Load(*client_);
  }
  void Load(client::Client& client) {
    auto cheats = client.LoadModule(ReadFileBytes(TestModulePath("cheats")), "cheats.so");
    ASSERT_THAT(cheats, IsOk());
    cheats_ = cheats->id();
    auto answers = client.LoadModule(ReadFileBytes(TestModulePath("answers")), "answers.so");
    ASSERT_THAT(answers, IsOk());
    answers_ = answers->id();
  }

  // c = a + b (or heavy_*'s f) over float32[n], strictly checked against its reference.
  v1::TimeEvaluateRequest Strict(const std::string& function, int n = 4096, int repeat = 20) {
    const std::string vec = absl::StrCat("float32[", n, "]");
    v1::TimeEvaluateRequest request =
        Time(cheats_, function, {vec, vec + ":random", vec + ":random"});
    request.set_repeat(repeat);
    v1::AnswerCheck* check = request.mutable_check();
    const bool heavy = function.rfind("heavy_", 0) == 0;
    check->mutable_reference()->set_module_id(heavy ? cheats_ : answers_);
    check->mutable_reference()->set_function(heavy ? "heavy_ref" : "add_ref");
    check->set_level(v1::AnswerCheck::STRICT);
    return request;
  }

  std::string cheats_, answers_;
};

TEST_F(StrictCheckTest, AnHonestKernelPassesWithTheRepeatsThatWereChecked) {
  v1::TimeEvaluateRequest request = Strict("add_ref");
  request.mutable_call()->set_module_id(answers_);
  auto result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->seconds_per_call_size(), 20);
  EXPECT_THAT(result->numbers(), Each(1));
  const v1::CheckVerdict& verdict = result->check();
  EXPECT_EQ(verdict.outcome(), v1::CheckVerdict::PASSED);
  EXPECT_EQ(verdict.level(), v1::AnswerCheck::STRICT);
  EXPECT_EQ(verdict.checked_repeats_size(), 4);
  EXPECT_THAT(verdict.checked_repeats(), Contains(19));  // always the last
  EXPECT_EQ(verdict.fresh_inputs(), 1);
  EXPECT_EQ(verdict.max_abs_error(), 0);
  EXPECT_FALSE(verdict.reference_reused());  // its seeds are its own
}

// The clients' default (until_stable) under strict checks: 20 repeats of one call each, four of
// them checked, the last always (a run that converged early would end before most checks).
TEST_F(StrictCheckTest, UntilStableTimesEveryCallAsItsOwnRepeat) {
  v1::TimeEvaluateRequest request = Strict("heavy_honest", 512);
  request.clear_repeat();
  request.set_until_stable(true);
  auto result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->seconds_per_call_size(), 20);
  EXPECT_THAT(result->numbers(), Each(1));
  EXPECT_EQ(result->check().outcome(), v1::CheckVerdict::PASSED);
  EXPECT_EQ(result->check().checked_repeats_size(), 4);
  EXPECT_THAT(result->check().checked_repeats(), Contains(19));
  // Every cheat of the kit is still refused under the default.
  for (const Cheat& cheat : CheatKit()) {
    v1::TimeEvaluateRequest cheating = Strict(cheat.function);
    cheating.clear_repeat();
    cheating.set_until_stable(true);
    EXPECT_FALSE(client_->TimeEvaluate(cheating).ok()) << cheat.function;
  }
  // A count beside it is refused: until_stable chooses them.
  request.set_repeat(5);
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("until_stable chooses the calls per repeat and the repeats")));
}

TEST_F(StrictCheckTest, EveryCheatingKernelIsRefusedNamingItsCheck) {
  for (const Cheat& cheat : CheatKit()) {
    SCOPED_TRACE(cheat.function);
    const absl::Status refused = client_->TimeEvaluate(Strict(cheat.function)).status();
    ASSERT_THAT(refused, StatusIs(absl::StatusCode::kAborted, Refuses(cheat)));
    // A wrong answer to every reader: the worker's own checks' failures too.
    const std::optional<v1::CheckVerdict> verdict = VerdictOf(refused);
    ASSERT_TRUE(verdict.has_value()) << refused;
    EXPECT_EQ(verdict->outcome(), v1::CheckVerdict::WRONG);
    EXPECT_EQ(verdict->level(), v1::AnswerCheck::STRICT);
    EXPECT_THAT(verdict->reference(), HasSubstr("_ref"));
  }
}

TEST_F(StrictCheckTest, TheSameKernelsPassABasicCheck) {
  // What strict checks add: each of these passes the first call's check on its own data.
  for (const char* function : {"add_remembers", "add_skips_familiar", "add_first_calls",
                               "add_when_changed", "add_reads_stale", "heavy_remembers"}) {
    SCOPED_TRACE(function);
    v1::TimeEvaluateRequest request = Strict(function, 4096, 5);
    request.mutable_check()->clear_level();
    EXPECT_THAT(client_->TimeEvaluate(request), IsOk());
  }
}

TEST_F(StrictCheckTest, HonestKernelsAreNeverRefusedOverManyStrictRuns) {
  // 6 kernels and sizes, hot and cold, 10 runs each: 120 strict runs of 20 repeats.
  std::vector<v1::TimeEvaluateRequest> honest;
  for (int n : {1, 1000, 65536}) {
    v1::TimeEvaluateRequest add = Strict("add_honest", n);
    add.mutable_call()->set_module_id(answers_);
    honest.push_back(add);
  }
  honest.push_back(Strict("heavy_honest", 512));
  for (const char* type : {"int8", "float16", "float64", "uint64"}) {
    v1::TimeEvaluateRequest copy = Time(
        answers_, "copy_honest", {absl::StrCat(type, "[777]"), absl::StrCat(type, "[777]:random")});
    copy.set_repeat(20);
    copy.mutable_check()->mutable_reference()->set_module_id("builtin");
    copy.mutable_check()->mutable_reference()->set_function("copy");
    copy.mutable_check()->set_level(v1::AnswerCheck::STRICT);
    honest.push_back(copy);
  }
  for (bool cold : {false, true}) {
    for (v1::TimeEvaluateRequest request : honest) {
      request.set_cold(cold);
      SCOPED_TRACE(absl::StrCat(request.call().function(), " ", request.call().args(0),
                                cold ? " cold" : " hot"));
      for (int run = 0; run < 10; ++run) {
        auto result = client_->TimeEvaluate(request);
        ASSERT_THAT(result, IsOk()) << "run " << run;
        EXPECT_EQ(result->check().outcome(), v1::CheckVerdict::PASSED);
      }
    }
  }
}

TEST_F(StrictCheckTest, ARunThatStopsEarlyChecksACallAfterItsLastRepeat) {
  v1::TimeEvaluateRequest honest = Strict("heavy_honest", 512, 200);
  // Converged at the tenth repeat: the filter sets aside a repeat a busy host preempted, which
  // alone would keep the spread of calls of a few microseconds over 1 for hundreds of repeats.
  honest.set_max_relative_stddev(1.0);
  honest.set_outlier_filter("iqr");
  auto passed = client_->TimeEvaluate(honest);
  ASSERT_THAT(passed, IsOk());
  EXPECT_LT(passed->seconds_per_call_size(), 200);
  EXPECT_THAT(passed->check().checked_repeats(), Contains(200));  // the call after the last
  v1::TimeEvaluateRequest idle = Strict("add_first_calls", 4096, 200);
  idle.set_max_relative_stddev(1.0);
  idle.set_outlier_filter("iqr");
  EXPECT_THAT(
      client_->TimeEvaluate(idle).status(),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("wrong answer: function 'add_first_calls'")));
}

TEST_F(StrictCheckTest, BitwiseChecksHoldCallsOnTheSameInputsToTheSameBits) {
  // Four checks, the first on fresh inputs and the others keeping them: all four share their
  // inputs.
  v1::TimeEvaluateRequest jitters = Strict("add_jitters");
  EXPECT_THAT(client_->TimeEvaluate(jitters), IsOk());  // within the tolerances every time
  jitters.mutable_check()->set_bitwise(true);
  EXPECT_THAT(
      client_->TimeEvaluate(jitters).status(),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("differs bit for bit from checked repeat")));
  v1::TimeEvaluateRequest honest = Strict("heavy_honest", 512);
  honest.mutable_check()->set_bitwise(true);
  EXPECT_THAT(client_->TimeEvaluate(honest), IsOk());
  honest.mutable_check()->clear_level();
  EXPECT_THAT(client_->TimeEvaluate(honest).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ask for checks strict")));
}

TEST_F(StrictCheckTest, OptionsThatStrictChecksCannotHoldAreRefused) {
  v1::TimeEvaluateRequest numbered = Strict("add_remembers");
  numbered.set_number(10);
  EXPECT_THAT(client_->TimeEvaluate(numbered).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("strict checks time every call as a repeat of its own")));
  v1::TimeEvaluateRequest growing = Strict("add_remembers");
  growing.set_min_repeat_ms(5);
  EXPECT_THAT(client_->TimeEvaluate(growing).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_repeat_ms")));
  v1::TimeEvaluateRequest expected = Strict("add_remembers", 2);
  expected.mutable_check()->clear_reference();
  v1::ExpectedOutput* out = expected.mutable_check()->add_expected();
  out->set_dtype("float32");
  out->add_shape(2);
  out->set_data(std::string(8, '\0'));
  EXPECT_THAT(client_->TimeEvaluate(expected).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("strict checks need a reference function")));
  v1::ProfileFunctionRequest profile;
  *profile.mutable_call() = Strict("add_remembers").call();
  *profile.mutable_check() = Strict("add_remembers").check();
  EXPECT_THAT(client_->ProfileFunction(profile).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("strict checks are made among a time evaluation's repeats")));
}

TEST_F(StrictCheckTest, EveryResultHasItsThroughputAndAnImpossibleStrictOneFails) {
  auto info = client_->Info();
  ASSERT_THAT(info, IsOk());
  ASSERT_GE(info->devices_size(), 1);
  EXPECT_GT(info->devices(0).peak_bandwidth_gbps(), 0);   // a copy through memory, at start
  EXPECT_GT(info->devices(0).cache_bandwidth_gbps(), 0);  // and within the caches
  v1::TimeEvaluateRequest plain = Strict("add_honest");
  plain.mutable_call()->set_module_id(answers_);
  plain.clear_check();
  plain.mutable_counts()->set_items(4096);
  plain.mutable_counts()->set_flop(4096);
  auto result = client_->TimeEvaluate(plain);
  ASSERT_THAT(result, IsOk());
  const v1::Throughput& t = result->throughput();
  const double median = result->statistics().median();
  EXPECT_EQ(t.bytes_per_call(), 3 * 4096 * 4);
  EXPECT_DOUBLE_EQ(t.bytes_per_second(), 3 * 4096 * 4 / median);
  EXPECT_DOUBLE_EQ(t.items_per_second(), 4096 / median);
  EXPECT_DOUBLE_EQ(t.flop_per_second(), 4096 / median);
  EXPECT_EQ(t.peak(), "cache");
  EXPECT_GT(t.peak_bytes_per_second(), 0);
  EXPECT_DOUBLE_EQ(t.fraction_of_peak(), t.bytes_per_second() / t.peak_bytes_per_second());
  // A petabyte a call is past any peak: reported when unchecked, refused when strict.
  plain.mutable_counts()->set_bytes(int64_t{1} << 50);
  auto reported = client_->TimeEvaluate(plain);
  ASSERT_THAT(reported, IsOk());
  EXPECT_GT(reported->throughput().fraction_of_peak(), 2);
  EXPECT_EQ(reported->throughput().peak(), "memory");
  v1::TimeEvaluateRequest strict = Strict("add_honest");
  strict.mutable_call()->set_module_id(answers_);
  *strict.mutable_counts() = plain.counts();
  EXPECT_THAT(client_->TimeEvaluate(strict).status(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("impossible speed: 1125899906842624 "
                                                             "bytes a call")));
}

TEST(StrictDaemonTest, ADaemonThatRequiresStrictChecksRefusesTheRest) {
  testing::TempDir cache;
  testing::Daemon daemon;
  ASSERT_TRUE(daemon.Start(cache.path() + "/cache", {"--require-checks", "strict"}));
  auto client = client::Client::Connect(daemon.target());
  ASSERT_THAT(client, IsOk());
  auto answers = (*client)->LoadModule(ReadFileBytes(TestModulePath("answers")), "answers.so");
  ASSERT_THAT(answers, IsOk());
  v1::TimeEvaluateRequest request;
  request.mutable_call()->set_module_id(answers->id());
  request.mutable_call()->set_function("add_honest");
  for (const char* spec : {"float32[64]", "float32[64]:random", "float32[64]:random"}) {
    request.mutable_call()->add_args(spec);
  }
  request.set_repeat(5);
  EXPECT_THAT(
      (*client)->TimeEvaluate(request).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--require-checks strict")));
  request.mutable_check()->mutable_reference()->set_module_id(answers->id());
  request.mutable_check()->mutable_reference()->set_function("add_ref");
  EXPECT_THAT(
      (*client)->TimeEvaluate(request).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("the job's check is basic")));
  v1::ProfileFunctionRequest profile;
  *profile.mutable_call() = request.call();
  *profile.mutable_check() = request.check();
  EXPECT_THAT((*client)->ProfileFunction(profile).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("a profile")));
  request.mutable_check()->set_level(v1::AnswerCheck::STRICT);
  auto strict = (*client)->TimeEvaluate(request);
  ASSERT_THAT(strict, IsOk());
  EXPECT_EQ(strict->check().level(), v1::AnswerCheck::STRICT);
}

TEST(StrictDaemonTest, ALevelThatIsNotOneIsRefusedAtStartSayingWhichAre) {
  testing::TempDir dir;
  testing::Daemon daemon;
  daemon.set_stderr(dir.path() + "/kprofd.log");
  EXPECT_FALSE(daemon.Start(dir.path() + "/cache", {"--require-checks", "paranoid"}));
  std::ifstream log(dir.path() + "/kprofd.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("--require-checks 'paranoid': none, basic or strict"));
}

TEST_F(StrictCheckTest, AStrictBatchOfTwoHundredBesideAnotherClientsHonestJobs) {
  // One client's 200 candidates, one in five cheating, while a second client's honest jobs run.
  const std::vector<std::string> cheaters = {"add_remembers", "add_skips_familiar",
                                             "add_first_calls", "add_when_changed"};
  std::vector<v1::BatchJob> jobs;
  std::map<std::string, std::string> expected;  // id -> "" (honest) or the cheater
  for (int i = 0; i < 200; ++i) {
    v1::BatchJob job;
    job.set_id(absl::StrCat("candidate-", i));
    const bool cheat = i % 5 == 2;
    const std::string function =
        cheat ? cheaters[static_cast<size_t>(i / 5) % cheaters.size()] : "add_honest";
    *job.mutable_time_evaluate() = Strict(function, 1024 + 16 * (i % 7), 5);
    if (!cheat) job.mutable_time_evaluate()->mutable_call()->set_module_id(answers_);
    expected[job.id()] = cheat ? function : "";
    jobs.push_back(job);
  }
  std::atomic<bool> done{false};
  std::atomic<int> other_passed{0}, other_failed{0};
  auto other = client::Client::Connect(daemon_.target());
  ASSERT_THAT(other, IsOk());
  std::thread neighbour([&] {
    v1::TimeEvaluateRequest honest = Strict("add_honest", 2048, 5);
    honest.mutable_call()->set_module_id(answers_);
    auto loaded = (*other)->LoadModule(ReadFileBytes(TestModulePath("answers")), "answers.so");
    if (!loaded.ok()) return;
    while (!done.load()) {
      auto result = (*other)->TimeEvaluate(honest);
      ++(result.ok() ? other_passed : other_failed);
    }
  });
  std::map<std::string, absl::Status> results;
  const absl::Status stream = client_->MeasureBatch(jobs, [&](const v1::BatchUpdate& update) {
    if (update.state() == v1::BatchUpdate::DONE || update.state() == v1::BatchUpdate::FAILED) {
      results[update.id()] = client::StatusOf(update);
    }
  });
  done = true;
  neighbour.join();
  ASSERT_THAT(stream, IsOk());
  ASSERT_EQ(results.size(), 200u);
  for (const auto& [id, status] : results) {
    SCOPED_TRACE(id);
    if (expected[id].empty()) {
      EXPECT_THAT(status, IsOk());
    } else {
      EXPECT_THAT(status, StatusIs(absl::StatusCode::kAborted,
                                   HasSubstr(absl::StrCat("wrong answer: function '", expected[id],
                                                          "', checked repeat"))));
    }
  }
  EXPECT_GT(other_passed.load(), 0);
  EXPECT_EQ(other_failed.load(), 0);
}

}  // namespace
}  // namespace kprof

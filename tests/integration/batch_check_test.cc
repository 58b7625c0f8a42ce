// Checked batches end to end: 50 distinct candidate modules of one entry point, 10 of them
// wrong in different ways, from two clients with different references at once — each client's
// reference runs once, the right candidates get their times, the wrong ones are named; and a
// ranking race over them ranks only the right ones.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "temp_dir.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

constexpr char kVerdictType[] = "type.googleapis.com/kprof.v1.CheckVerdict";
const std::vector<std::string> kWrong = {"nothing", "half", "minus", "writes_input", "nan"};

// A variant of add() as distinct bytes: the module's own, and a tag after them.
std::string Distinct(const std::string& variant, const std::string& tag) {
  return ReadFileBytes(TestModulePath("add_" + variant)) + "kprof-candidate-" + tag;
}

struct Outcome {
  int passed = 0, wrong = 0, computed = 0;  // computed: verdicts whose reference ran for them
  std::vector<std::string> wrong_ids;
};

Outcome RunBatch(client::Client& client, const std::string& reference_module,
                 const std::string& reference_function, const std::string& who) {
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 25; ++i) {
    const std::string variant = i < 20 ? "honest" : kWrong[static_cast<size_t>(i - 20)];
    auto module = client.LoadModule(Distinct(variant, absl::StrCat(who, i)), "cand.so");
    EXPECT_THAT(module, IsOk());
    v1::BatchJob& job = jobs.emplace_back();
    job.set_id(absl::StrCat(variant, "-", i));
    v1::TimeEvaluateRequest* r = job.mutable_time_evaluate();
    r->mutable_call()->set_module_id(module->id());
    r->mutable_call()->set_function("add");
    for (const char* arg : {"float32[2048]", "float32[2048]:random", "float32[2048]:random"}) {
      r->mutable_call()->add_args(arg);
    }
    r->set_repeat(2);
    r->mutable_check()->mutable_reference()->set_module_id(reference_module);
    r->mutable_check()->mutable_reference()->set_function(reference_function);
  }
  Outcome outcome;
  const absl::Status stream = client.MeasureBatch(jobs, [&](const v1::BatchUpdate& update) {
    if (update.state() == v1::BatchUpdate::DONE) {
      ++outcome.passed;
      EXPECT_EQ(update.time_evaluate().check().outcome(), v1::CheckVerdict::PASSED);
      EXPECT_EQ(update.time_evaluate().seconds_per_call_size(), 2);
      EXPECT_GT(update.time_evaluate().statistics().median(), 0);
      outcome.computed += !update.time_evaluate().check().reference_reused();
    } else if (update.state() == v1::BatchUpdate::FAILED) {
      ++outcome.wrong;
      outcome.wrong_ids.push_back(update.id());
      EXPECT_EQ(update.code(), static_cast<int>(absl::StatusCode::kAborted)) << update.message();
      EXPECT_THAT(update.message(), HasSubstr("wrong answer"));
      v1::CheckVerdict verdict;
      for (const auto& detail : update.details()) {
        if (detail.type_url() == kVerdictType) verdict.ParseFromString(detail.value());
      }
      EXPECT_EQ(verdict.outcome(), v1::CheckVerdict::WRONG) << update.id();
      outcome.computed += !verdict.reference_reused();
    }
  });
  EXPECT_THAT(stream, IsOk());
  return outcome;
}

TEST(BatchCheckTest, TwoClientsWithTheirOwnReferencesGetRightTimesAndNamedWrongOnes) {
  testing::TempDir dir;
  testing::Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache",
                           {"--token-file", testing::WriteTokenFile(dir.path(), 2)}));
  auto first = testing::ConnectAs(daemon.target(), 0);
  auto second = testing::ConnectAs(daemon.target(), 1);
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  // Client 0 against answers.so's add_ref, client 1 against an honest add() of its own.
  auto answers = (*first)->LoadModule(ReadFileBytes(TestModulePath("answers")), "answers.so");
  auto honest = (*second)->LoadModule(ReadFileBytes(TestModulePath("add_honest")), "ref.so");
  ASSERT_THAT(answers, IsOk());
  ASSERT_THAT(honest, IsOk());
  Outcome a, b;
  std::thread other([&] { b = RunBatch(**second, honest->id(), "add", "b"); });
  a = RunBatch(**first, answers->id(), "add_ref", "a");
  other.join();
  for (const Outcome* o : {&a, &b}) {
    EXPECT_EQ(o->passed, 20);
    EXPECT_EQ(o->wrong, 5);
    EXPECT_EQ(o->computed, 1);  // the reference ran once for the client's 25 candidates
    for (const std::string& id : o->wrong_ids) EXPECT_EQ(id.rfind("honest", 0), std::string::npos);
  }
}

TEST(BatchCheckTest, ARankingRaceRanksOnlyTheRightCandidates) {
  testing::TempDir dir;
  testing::Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache"));
  std::ofstream jobs(dir.path() + "/jobs.jsonl");
  const std::string reference = TestModulePath("add_honest");
  for (int i = 0; i < 8; ++i) {
    const std::string variant = i < 3 ? "honest" : kWrong[static_cast<size_t>(i - 3)];
    const std::string path = absl::StrCat(dir.path(), "/cand", i, ".so");
    std::ofstream(path, std::ios::binary) << Distinct(variant, absl::StrCat("rank", i));
    jobs << nlohmann::json{{"id", absl::StrCat(variant, "-", i)},
                           {"module", path},
                           {"function", "add"},
                           {"args",
                            {"float32[2048]", "float32[2048]:random", "float32[2048]:random"}},
                           {"reference", {{"module", reference}, {"function", "add"}}}}
                .dump()
         << "\n";
  }
  jobs.close();
  const testing::CliResult rank = testing::RunKprof(
      daemon.target(), "batch " + dir.path() + "/jobs.jsonl --rank --format json", dir.path());
  const size_t at = rank.out.rfind("{\"ranking\"");
  ASSERT_NE(at, std::string::npos) << rank.out << rank.err;
  const auto ranking = nlohmann::json::parse(rank.out.substr(at))["ranking"];
  int ranked = 0, failed = 0;
  for (const auto& candidate : ranking["candidates"]) {
    const std::string name = candidate["name"];
    if (name.rfind("honest", 0) == 0) {
      EXPECT_NE(candidate["state"], "failed") << candidate.dump();
      ++ranked;
    } else {
      EXPECT_EQ(candidate["state"], "failed") << name;
      EXPECT_THAT(candidate["error"].get<std::string>(), HasSubstr("ABORTED: wrong answer"));
      ++failed;
    }
  }
  EXPECT_EQ(ranked, 3);
  EXPECT_EQ(failed, 5);
  EXPECT_EQ(ranking["fastest"].get<std::string>().rfind("honest", 0), 0u);
}

}  // namespace
}  // namespace kprof

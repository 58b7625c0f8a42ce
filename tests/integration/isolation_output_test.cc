// What a module prints goes to the client whose job printed it, never into the daemon's log: a
// real kprofd, real workers, the printing functions of tests/modules/faults.c.
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
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

using ::kprof::testing::ConnectAs;
using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

class OutputTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--token-file", ::kprof::testing::WriteTokenFile(dir_.path(), 2)});
    daemon_.set_stderr(log_);
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", extra));
    for (int i = 0; i < 2; ++i) {
      auto client = ConnectAs(daemon_.target(), i);
      ASSERT_THAT(client, IsOk());
      clients_.push_back(*std::move(client));
    }
    for (const auto& client : clients_) {
      auto faults = client->LoadModuleFile(TestModulePath("faults"));
      ASSERT_THAT(faults, IsOk());
      faults_ = faults->id();
    }
  }

  absl::StatusOr<v1::TimeEvaluateResponse> Time(int client, const std::string& function,
                                                int repeat = 1) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(faults_);
    request.mutable_call()->set_function(function);
    request.set_repeat(repeat);
    return clients_[static_cast<size_t>(client)]->TimeEvaluate(request);
  }

  std::string Log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  TempDir dir_;
  const std::string log_ = dir_.path() + "/kprofd.log";
  Daemon daemon_;
  std::vector<std::unique_ptr<client::Client>> clients_;
  std::string faults_;
};

TEST_F(OutputTest, WhatAModulePrintsIsItsJobsOutputEscapedAndNeverInTheDaemonsLog) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto printed = Time(0, "prints", 2);
  ASSERT_THAT(printed, IsOk());
  const std::string& tail = printed->output().tail();
  // Three calls (the first untimed): each call's lines, in order, the last without its newline.
  EXPECT_THAT(tail, HasSubstr("hello from the kernel\n"));
  EXPECT_THAT(tail, HasSubstr("error lease deadbeef on cpu:0 ended: forged CODE=ABORTED\n"));
  EXPECT_THAT(tail, HasSubstr("moves the cursor: \\x1b[2J\n"));
  EXPECT_THAT(tail, Not(HasSubstr("\x1b")));
  EXPECT_THAT(tail, EndsWith("no newline at the end"));
  EXPECT_EQ(printed->output().bytes(), 3 * (22 + 82 + 23 + 21));
  // The next job of the same worker has its own output, not the last one's again.
  auto quiet = Time(0, "succeeds");
  ASSERT_THAT(quiet, IsOk());
  EXPECT_FALSE(quiet->has_output());
  // Another client's job never has it.
  auto other = Time(1, "prints");
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(other->output().bytes(), 2 * (22 + 82 + 23 + 21));  // the first call, the timed one
  const std::string log = Log();
  EXPECT_THAT(log, Not(HasSubstr("hello from the kernel")));
  EXPECT_THAT(log, Not(HasSubstr("forged")));
}

TEST_F(OutputTest, AFloodNeitherStallsTheKernelNorReachesTheLog) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto flood = Time(0, "prints_a_flood", 3);
  ASSERT_THAT(flood, IsOk());
  const int64_t per_call = 128 << 16;
  EXPECT_EQ(flood->output().bytes(), 4 * per_call + 4 * 18);
  EXPECT_LE(flood->output().tail().size(), 16u << 10);
  EXPECT_THAT(flood->output().tail(), EndsWith("flood call 4 done\n"));
  struct stat st {};
  ASSERT_EQ(stat(log_.c_str(), &st), 0);
  EXPECT_LT(st.st_size, 64 << 10) << "32 MiB printed, and the log grew by " << st.st_size;
}

TEST_F(OutputTest, ACrashOrAHangSaysWhatTheFunctionPrintedLast) {
  ASSERT_NO_FATAL_FAILURE(Start({"--job-timeout", "1s"}));
  EXPECT_THAT(Time(0, "prints_and_hangs").status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("was stopped; its worker was restarted; its output ended: "
                                 "\"waiting for a lock no one releases\"")));
  EXPECT_THAT(Time(0, "asserts").status(),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("killed by SIGABRT (Aborted); its output ended: \"vadd.c:12: "
                                 "vadd: check failed: n > 0")));
  // A new worker, which prints nothing of the old one's.
  auto next = Time(0, "succeeds");
  ASSERT_THAT(next, IsOk());
  EXPECT_FALSE(next->has_output());
}

TEST_F(OutputTest, LogWorkerOutputCopiesLinesEscapedTaggedAndCapped) {
  ASSERT_NO_FATAL_FAILURE(Start({"--log-worker-output", "300"}));
  ASSERT_THAT(Time(0, "prints"), IsOk());
  ASSERT_THAT(Time(0, "prints_a_flood"), IsOk());
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr(" worker "));
  EXPECT_THAT(log, HasSubstr(": hello from the kernel\n"));
  EXPECT_THAT(log, HasSubstr(": moves the cursor: \\x1b[2J\n"));
  EXPECT_THAT(log, HasSubstr("(300 bytes logged; the rest until its next answer is not)"));
  EXPECT_LT(log.size(), 64u << 10);
}

TEST_F(OutputTest, TheCliShowsTheOutputUnderItsTableAndOnABatchLine) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string tokens = dir_.path() + "/tokens";
  const auto table = ::kprof::testing::RunKprof(
      daemon_.target(), "--token-file " + tokens + " time " + faults_ + " prints --repeat 1",
      dir_.path());
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("\nOutput\n------\nhello from the kernel\n"));
  EXPECT_THAT(table.out, Not(HasSubstr("\x1b")));
  const std::string jobs = dir_.path() + "/jobs.jsonl";
  std::ofstream(jobs) << R"({"id": "p", "module": ")" << faults_
                      << R"(", "function": "prints", "repeat": 1})"
                      << "\n";
  const auto batch = ::kprof::testing::RunKprof(
      daemon_.target(), "--token-file " + tokens + " batch " + jobs, dir_.path());
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  const nlohmann::json line = nlohmann::json::parse(batch.out);
  EXPECT_THAT(line["output"]["tail"].get<std::string>(), HasSubstr("hello from the kernel"));
  EXPECT_EQ(line["output"]["bytes"], 2 * (22 + 82 + 23 + 21));
}

}  // namespace
}  // namespace kprof

// A shared daemon's fair share as its operators and users see it: weights in the token file,
// GetInfo and `kprof info` naming whose job runs and who waits, and a weight the daemon cannot
// read refused at start, saying why.
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "cli.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "status_matchers.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;

std::unique_ptr<client::Client> Connect(const std::string& target, const std::string& token) {
  auto connected = ::kprof::testing::ConnectWithToken(target, token);
  EXPECT_THAT(connected, IsOk());
  return connected.ok() ? *std::move(connected) : nullptr;
}

v1::TimeEvaluateRequest Sleep(int us) {
  v1::TimeEvaluateRequest request;
  request.mutable_call()->set_module_id("builtin");
  request.mutable_call()->set_function("sleep_us");
  request.mutable_call()->add_args("float64:" + std::to_string(us));
  request.set_number(1);
  request.set_repeat(1);
  return request;
}

TEST(FairShare, InfoNamesWhoseJobRunsAndWhoWaits) {
  TempDir dir;
  std::ofstream(dir.path() + "/tokens") << "token-of-a tuner-a weight=3\ntoken-of-b tuner-b\n";
  chmod(dir.path().c_str(), 0755);
  chmod((dir.path() + "/tokens").c_str(), 0644);
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache", {"--token-file", dir.path() + "/tokens"}));
  auto a = Connect(daemon.target(), "token-of-a");
  auto b = Connect(daemon.target(), "token-of-b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_THAT(a->TimeEvaluate(Sleep(1)), IsOk());  // their workers start before the test
  ASSERT_THAT(b->TimeEvaluate(Sleep(1)), IsOk());

  std::thread running([&] { EXPECT_THAT(a->TimeEvaluate(Sleep(1'500'000)), IsOk()); });
  std::vector<std::thread> waiting;
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {
    auto info = b->Info();
    ASSERT_THAT(info, IsOk());
    const v1::DeviceInfo& cpu = info->devices(0);
    if (cpu.running_client() == "tuner-a" && waiting.empty()) {
      for (int j = 0; j < 2; ++j) {
        waiting.emplace_back([&] { EXPECT_THAT(b->TimeEvaluate(Sleep(1000)), IsOk()); });
      }
    }
    seen = cpu.running_client() == "tuner-a" && cpu.queued_size() == 1 &&
           cpu.queued(0).client() == "tuner-b" && cpu.queued(0).jobs() == 2;
    if (seen) {
      const auto cli = ::kprof::testing::RunKprof(
          daemon.target(), "--token-file " + dir.path() + "/tokens info", dir.path());
      EXPECT_THAT(cli.out, HasSubstr("running: tuner-a; queued: tuner-b 2")) << cli.err;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(seen) << "GetInfo never showed tuner-a running and tuner-b's two jobs waiting";
  running.join();
  for (std::thread& t : waiting) t.join();
  auto idle = a->Info();
  ASSERT_THAT(idle, IsOk());
  EXPECT_EQ(idle->devices(0).running_client(), "");
  EXPECT_EQ(idle->devices(0).queued_size(), 0);
}

TEST(FairShare, AWeightTheDaemonCannotReadIsRefusedAtStart) {
  TempDir dir;
  for (const auto& [tokens, says] : std::vector<std::pair<std::string, std::string>>{
           {"t1 alice weight=0\n",
            "'weight=0' is not a weight (accepted: weight=N, N from 1 to 1000)"},
           {"t1 alice weight=lots\n", "'weight=lots' is not a weight"},
           {"t1 alice weight=2\nt2 alice weight=3\n",
            "the label 'alice' has weight 2 on an earlier line; give one weight"}}) {
    std::ofstream(dir.path() + "/tokens") << tokens;
    Daemon daemon;
    const std::string log = dir.path() + "/kprofd.log";
    daemon.set_stderr(log);
    EXPECT_FALSE(daemon.Start(dir.path() + "/cache", {"--token-file", dir.path() + "/tokens"}));
    EXPECT_THAT(::kprof::testing::ReadFileBytes(log), HasSubstr(says)) << tokens;
  }
  // A token rotating in without the weight takes its label's.
  std::ofstream(dir.path() + "/tokens") << "t1 alice weight=3\nt2 alice\n";
  Daemon rotating;
  EXPECT_TRUE(rotating.Start(dir.path() + "/cache", {"--token-file", dir.path() + "/tokens"}));
}

}  // namespace
}  // namespace kprof

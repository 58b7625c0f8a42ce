// kprof top against a real daemon: live in a terminal (a tmux pane the test reads), quitting on
// q; and as frames printed one after another without one. Also `--priority`, which decides the
// order jobs of one client leave its queue in.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::CommandOutput;
using ::kprof::testing::ConnectWithToken;
using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::KprofPath;
using ::kprof::testing::RunKprof;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

v1::TimeEvaluateRequest Spin(int us) {
  v1::TimeEvaluateRequest request;
  request.mutable_call()->set_module_id("builtin");
  request.mutable_call()->set_function("spin_us");
  request.mutable_call()->add_args("float64:" + std::to_string(us));
  request.set_repeat(1);
  return request;
}

// The cpu:0 row's DONE column in a frame; -1 when there is none.
int64_t DoneOnCpu(const std::string& frame) {
  for (absl::string_view line : absl::StrSplit(frame, '\n')) {
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() > 4 && words[1] == "cpu:0") {
      int64_t done = 0;
      return absl::SimpleAtoi(words[4], &done) ? done : -1;
    }
  }
  return -1;
}

class TopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache"));
    auto connected = client::Client::Connect(daemon_.target());
    ASSERT_THAT(connected, IsOk());
    client_ = *std::move(connected);
  }
  TempDir dir_;
  Daemon daemon_;
  std::unique_ptr<client::Client> client_;
};

TEST_F(TopTest, ALiveViewInATerminalRefreshesInPlaceAndQuitsOnQ) {
  const std::string tmux = absl::StrCat("tmux -L kprof-top-", getpid(), " -f /dev/null ");
  ASSERT_EQ(std::system((tmux + "new-session -d -x 200 -y 30 -s top '" + KprofPath() +
                         " --target " + daemon_.target() + " top --interval 200ms'")
                            .c_str()),
            0);
  // However the test ends, the terminal and what runs in it go.
  absl::Cleanup kill_tmux = [&tmux] {
    (void)std::system((tmux + "kill-server 2>/dev/null").c_str());
  };
  const auto screen = [&] { return CommandOutput(tmux + "capture-pane -p -t top 2>/dev/null"); };
  std::string seen;
  for (int i = 0; i < 100 && DoneOnCpu(seen) < 0; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    seen = screen();
  }
  ASSERT_GE(DoneOnCpu(seen), 0) << seen;
  EXPECT_THAT(seen, HasSubstr("JOBS/S"));
  EXPECT_THAT(seen, HasSubstr("(q quits)"));
  // Jobs run: the next frames count them, in place (one header on the screen).
  const int64_t before = DoneOnCpu(seen);
  for (int i = 0; i < 20; ++i) ASSERT_THAT(client_->TimeEvaluate(Spin(10)), IsOk());
  for (int i = 0; i < 100 && DoneOnCpu(seen) < before + 20; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    seen = screen();
  }
  EXPECT_GE(DoneOnCpu(seen), before + 20) << seen;
  size_t headers = 0;
  for (size_t at = seen.find("JOBS/S"); at != std::string::npos; at = seen.find("JOBS/S", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 1u) << seen;

  ASSERT_EQ(std::system((tmux + "send-keys -t top q").c_str()), 0);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    gone = std::system((tmux + "has-session -t top 2>/dev/null").c_str()) != 0;
  }
  EXPECT_TRUE(gone) << "kprof top did not quit on q";
}

TEST_F(TopTest, WithoutATerminalItPrintsFramesOneAfterAnother) {
  const auto out = RunKprof(daemon_.target(), "top --iterations 2 --interval 100ms", dir_.path());
  EXPECT_EQ(out.exit_code, 0) << out.err;
  size_t headers = 0;
  for (size_t at = out.out.find("JOBS/S"); at != std::string::npos;
       at = out.out.find("JOBS/S", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 2u) << out.out;
  EXPECT_GE(DoneOnCpu(out.out), 0) << out.out;
  EXPECT_EQ(out.out.find("\x1b["), std::string::npos) << "escape codes without a terminal";
  const auto bad = RunKprof(daemon_.target(), "top --interval soon", dir_.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--interval 'soon' is not a duration"));
}

TEST(TopOfAFarm, EachDaemonHasItsRowsAndOneThatDoesNotAnswerSaysSo) {
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  Daemon first, second;
  ASSERT_TRUE(first.Start(dir.path() + "/cache1"));
  ASSERT_TRUE(second.Start(dir.path() + "/cache2"));
  auto client = client::Client::Connect(second.target());
  ASSERT_THAT(client, IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_THAT((*client)->TimeEvaluate(Spin(10)), IsOk());
  // A third address where nothing listens: a port the first daemon held, now closed.
  Daemon gone;
  ASSERT_TRUE(gone.Start(dir.path() + "/cache3"));
  const std::string nowhere = gone.target();
  gone.Stop();
  const auto out = RunKprof(first.target() + "," + second.target() + "," + nowhere,
                            "top --iterations 1 --timeout 2s", dir.path());
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.out, HasSubstr("3 daemons"));
  int rows_first = 0, rows_second = 0;
  for (absl::string_view line : absl::StrSplit(out.out, '\n')) {
    rows_first += absl::StartsWith(line, first.target() + " ") && absl::StrContains(line, "cpu:0");
    if (absl::StartsWith(line, second.target() + " ") && absl::StrContains(line, "cpu:0")) {
      ++rows_second;
      EXPECT_GE(DoneOnCpu(std::string(line)), 3) << line;
    }
  }
  EXPECT_EQ(rows_first, 1) << out.out;
  EXPECT_EQ(rows_second, 1) << out.out;
  bool unreachable = false;
  for (absl::string_view line : absl::StrSplit(out.out, '\n')) {
    unreachable |= absl::StartsWith(line, nowhere + " ") &&
                   absl::StrContains(line, "unreachable: no kprofd answers (UNAVAILABLE");
  }
  EXPECT_TRUE(unreachable) << out.out;
}

// The order two `kprof time` jobs queued behind a busy device end in: `first` (ARGS of token
// file FIRST) is queued, then `second`; returns true when `second` ends first.
bool SecondEndsFirst(const Daemon& daemon, client::Client& busy, const std::string& dir,
                     const std::string& first, const std::string& second) {
  // Long enough for both kprof processes to start and queue on a loaded machine.
  std::thread occupy([&] { EXPECT_THAT(busy.TimeEvaluate(Spin(2'500'000)), IsOk()); });
  absl::SleepFor(absl::Milliseconds(150));
  std::atomic<int> order{0};
  int first_place = 0, second_place = 0;
  const auto run = [&](const std::string& args, const std::string& scratch, int* place) {
    std::filesystem::create_directories(scratch);
    const auto r = RunKprof(daemon.target(), "--token-file " + dir + args, scratch);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    *place = ++order;
  };
  std::thread a([&] { run(first, dir + "/a", &first_place); });
  absl::SleepFor(absl::Milliseconds(250));
  std::thread b([&] { run(second, dir + "/b", &second_place); });
  occupy.join();
  a.join();
  b.join();
  return second_place < first_place;
}

TEST(Priority, InteractiveJobsGoAheadOfTheirClientsBatchOnesNotOfOtherClients) {
  // One client keeps the device busy while two jobs queue behind it. A client's interactive
  // job goes ahead of its own batch job; another client's interactive job waits its turn behind
  // the first client's batch one.
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  std::ofstream(dir.path() + "/tokens")
      << "token-x busy\ntoken-y tuner\ntoken-w farm\ntoken-z person\n";
  for (const char* t : {"y", "w", "z"})
    std::ofstream(dir.path() + "/" + t) << "token-" << t << "\n";
  for (const char* f : {"/tokens", "/y", "/w", "/z"}) chmod((dir.path() + f).c_str(), 0644);
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache", {"--token-file", dir.path() + "/tokens"}));
  auto busy = ConnectWithToken(daemon.target(), "token-x");
  ASSERT_THAT(busy, IsOk());
  const std::string spin = " time builtin spin_us --arg float64:300000 --repeat 1 --priority ";
  EXPECT_TRUE(SecondEndsFirst(daemon, **busy, dir.path(), "/y" + spin + "batch",
                              "/y" + spin + "interactive"));
  // Two clients new to the device (neither has had a turn): the first queued goes first.
  EXPECT_FALSE(SecondEndsFirst(daemon, **busy, dir.path(), "/w" + spin + "batch",
                               "/z" + spin + "interactive"));
  const auto bad = RunKprof(
      daemon.target(),
      "--token-file " + dir.path() + "/y time builtin spin_us --arg float64:1 --priority urgent",
      dir.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--priority"));
}

// A job behind another client's long one says so on stderr after a second: who holds the
// device, for how long, and who queues; a job that runs at once says nothing of the kind.
TEST(Waits, AJobBehindAnotherClientsLongOneSaysWhatItWaitsFor) {
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  std::ofstream(dir.path() + "/tokens") << "token-x busy\ntoken-y tuner\n";
  std::ofstream(dir.path() + "/y") << "token-y\n";
  for (const char* f : {"/tokens", "/y"}) chmod((dir.path() + f).c_str(), 0644);
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache", {"--token-file", dir.path() + "/tokens"}));
  const std::string nop = "--token-file " + dir.path() + "/y time builtin nop --repeat 1";
  const auto quick = RunKprof(daemon.target(), nop, dir.path());
  ASSERT_EQ(quick.exit_code, 0) << quick.err;
  EXPECT_THAT(quick.err, Not(HasSubstr("waiting for")));

  auto busy = ConnectWithToken(daemon.target(), "token-x");
  ASSERT_THAT(busy, IsOk());
  std::thread occupy([&] { EXPECT_THAT((*busy)->TimeEvaluate(Spin(1'500'000)), IsOk()); });
  absl::SleepFor(absl::Milliseconds(200));
  const auto waited = RunKprof(daemon.target(), nop, dir.path());
  occupy.join();
  ASSERT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_THAT(waited.err, HasSubstr("kprof: waiting for cpu:0: it has run busy's jobs for "));
  EXPECT_THAT(waited.err, HasSubstr(" s; queued: tuner 1\n"));
  EXPECT_THAT(waited.out, HasSubstr("nop"));  // and then its answer
}

}  // namespace
}  // namespace kprof

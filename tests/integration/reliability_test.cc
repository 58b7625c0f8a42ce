// kprofd under abuse: crashing, hanging and greedy kernels, cancelled and timed-out clients,
// full queues, shutdown under load, SIGKILL, and a load test mixing all of it.
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "emulation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "processes.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::ChildrenOf;
using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::ResidentKb;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

class ReliabilityTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra = {}) {
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", extra));
    auto connected = client::Client::Connect(daemon_.target());
    ASSERT_THAT(connected, IsOk());
    client_ = std::move(*connected);
    auto module = client_->LoadModuleFile(TestModulePath("faults"));
    ASSERT_THAT(module, IsOk());
    faults_ = module->id();
  }

  v1::TimeEvaluateRequest Call(const std::string& function) const {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(faults_);
    request.mutable_call()->set_function(function);
    return request;
  }

  absl::Status Run(const std::string& function, absl::Duration timeout = absl::Seconds(30)) {
    return client_->TimeEvaluate(Call(function), timeout).status();
  }

  // Polls GetInfo until `predicate` holds for cpu:0, up to 20 s.
  template <typename Predicate>
  bool EventuallyDevice(Predicate predicate) {
    for (int i = 0; i < 2000; ++i) {
      auto info = client_->Info();
      if (info.ok() && predicate(info->devices(0))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  TempDir dir_;
  Daemon daemon_;
  std::unique_ptr<client::Client> client_;
  std::string faults_;
};

TEST_F(ReliabilityTest, EveryWayToCrashIsNamedAndTheNextJobRuns) {
  Start();
  const std::pair<const char*, const char*> cases[] = {
    {"segfault", "function 'segfault' crashed: worker killed by SIGSEGV"},
    {"aborts", "killed by SIGABRT"},
    {"divides_by_zero", "killed by SIGFPE"},
    {"bus_error", "killed by SIGBUS"},
    {"illegal_instruction", "killed by SIGILL"},
    {"overflows_stack", "killed by SIGSEGV"},
    {"calls_exit", "function 'calls_exit' crashed: worker exited with status 3"},
    {"calls_underscore_exit", "worker exited with status 4"},
    {"closes_streams",
     "function 'closes_streams' closed the worker's standard streams (0, 1, 2); its worker "
     "was replaced"},
  // Two calls (the discarded first one and the timed one), two threads left behind.
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer starts a thread of its own with the process's second.
    {"leaves_thread", "function 'leaves_thread' left 3 thread(s) running"},
#else
    {"leaves_thread", "function 'leaves_thread' left 2 thread(s) running"},
#endif
  };
  for (const auto& [function, message] : cases) {
    EXPECT_THAT(Run(function), StatusIs(absl::StatusCode::kAborted, HasSubstr(message)))
        << function;
    EXPECT_THAT(Run("succeeds"), IsOk()) << "after " << function;
  }
  EXPECT_LE(ChildrenOf(daemon_.pid()).size(), 1u);
}

TEST_F(ReliabilityTest, GreedyJobsFailInsideTheWorker) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory rules out a data-size limit";
#endif
  KPROF_SKIP_UNDER_EMULATION("does not enforce RLIMIT_DATA on the programs it runs");
  Start({"--worker-memory-limit", std::to_string(uint64_t{1} << 30)});
  EXPECT_THAT(Run("allocates_too_much"),
              StatusIs(absl::StatusCode::kAborted, "function 'allocates_too_much' returned 12"));
  v1::TimeEvaluateRequest huge = Call("succeeds");
  huge.mutable_call()->add_args("float32[536870912]");  // 2 GiB: within the argument limit
  EXPECT_THAT(client_->TimeEvaluate(huge).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("cannot allocate")));
  EXPECT_THAT(Run("succeeds"), IsOk());
}

TEST_F(ReliabilityTest, JobTimeoutKillsAHangAndSaysHowLongItRan) {
  Start({"--job-timeout", "1s"});
  EXPECT_THAT(Run("hangs"),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("the job ran 1s (the daemon's --job-timeout) and was stopped")));
  EXPECT_THAT(Run("succeeds"), IsOk());
  EXPECT_LE(ChildrenOf(daemon_.pid()).size(), 1u);
}

TEST_F(ReliabilityTest, ClientDeadlineStopsARunningJob) {
  Start();  // job timeout 60 s: only the client's deadline can stop the hang
  EXPECT_THAT(Run("hangs", absl::Milliseconds(500)), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(EventuallyDevice([](const v1::DeviceInfo& d) { return !d.busy(); }));
  EXPECT_THAT(Run("succeeds"), IsOk());
}

// The daemon stops a job a little before the client's deadline (a tenth of the time, half a
// second at most) and says why, while the client still listens.
TEST_F(ReliabilityTest, TheDaemonSaysWhyAJobStoppedBeforeTheClientsDeadline) {
  Start();  // job timeout 60 s
  EXPECT_THAT(Run("hangs", absl::Seconds(4)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("(the request's deadline) and was stopped")));
}

TEST_F(ReliabilityTest, CancelledJobsLeaveTheQueue) {
  Start({"--job-timeout", "3s"});
  std::thread hang([this] { (void)Run("hangs"); });
  ASSERT_TRUE(EventuallyDevice([](const v1::DeviceInfo& d) { return d.busy(); }));
  // Waits in the queue behind the hang until its deadline: then it must leave the queue.
  EXPECT_THAT(Run("succeeds", absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(EventuallyDevice([](const v1::DeviceInfo& d) {
    return d.queue_length() == 0 && d.busy();  // gone while the hang still runs
  }));
  hang.join();
}

TEST_F(ReliabilityTest, FullQueueIsResourceExhaustedAtOnce) {
  Start({"--max-queue", "1", "--job-timeout", "2s"});
  std::thread running([this] { (void)Run("hangs"); });
  ASSERT_TRUE(EventuallyDevice([](const v1::DeviceInfo& d) { return d.busy(); }));
  std::thread waiting([this] { (void)Run("succeeds"); });
  ASSERT_TRUE(EventuallyDevice([](const v1::DeviceInfo& d) { return d.queue_length() == 1; }));
  EXPECT_THAT(
      Run("succeeds"),
      StatusIs(absl::StatusCode::kResourceExhausted,
               "the queue of cpu:0 is full (1 jobs waiting, limit 1 per client); retry later"));
  running.join();
  waiting.join();
}

TEST_F(ReliabilityTest, ShutdownUnderLoadAnswersQueuedJobsAndExitsZero) {
  Start({"--job-timeout", "2s"});
  absl::Status running_status, queued_status[2];
  std::thread running([&] { running_status = Run("hangs"); });
  ASSERT_TRUE(EventuallyDevice([](const v1::DeviceInfo& d) { return d.busy(); }));
  std::thread queued0([&] { queued_status[0] = Run("succeeds"); });
  std::thread queued1([&] { queued_status[1] = Run("succeeds"); });
  ASSERT_TRUE(EventuallyDevice([](const v1::DeviceInfo& d) { return d.queue_length() == 2; }));
  const int status = daemon_.Stop();
  running.join();
  queued0.join();
  queued1.join();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (const absl::Status& s : queued_status) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
  }
  EXPECT_THAT(running_status, StatusIs(absl::StatusCode::kDeadlineExceeded));  // it ran out
}

TEST_F(ReliabilityTest, SigkillLeavesNoWorkerAndTheCacheRestarts) {
  Start();
  std::thread hang([this] { (void)Run("hangs", absl::Seconds(5)); });
  ASSERT_TRUE(EventuallyDevice([](const v1::DeviceInfo& d) { return d.busy(); }));
  const std::vector<pid_t> workers = ChildrenOf(daemon_.pid());
  ASSERT_EQ(workers.size(), 1u);
  kill(daemon_.pid(), SIGKILL);
  daemon_.Stop();  // reaps it
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    gone = kill(workers[0], 0) != 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the worker outlived its daemon";
  hang.join();
  Start();  // same cache: the lock was released with the process, the module is still there
  EXPECT_THAT(Run("succeeds"), IsOk());
}

TEST_F(ReliabilityTest, HalfWrittenAndDamagedModulesAreDroppedAtStart) {
  Start();
  const std::string modules = dir_.path() + "/cache/modules";
  ASSERT_EQ(daemon_.Stop(), 0);
  // What a SIGKILL mid-write could leave, and a module whose bytes no longer match its name.
  std::ofstream(modules + "/.upload-abc123") << "half a module";
  std::ofstream(modules + "/" + std::string(64, 'e')) << "not the bytes of this hash";
  Start();
  EXPECT_FALSE(std::ifstream(modules + "/.upload-abc123").good());
  EXPECT_FALSE(std::ifstream(modules + "/" + std::string(64, 'e')).good());
  EXPECT_THAT(client_->HasModule(std::string(64, 'e')), ::kprof::testing::IsOkAndHolds(false));
  EXPECT_THAT(Run("succeeds"), IsOk());  // the good module survived
}

TEST_F(ReliabilityTest, JobsOnOneDeviceNeverOverlap) {
  // Each call writes its interval to the worker's standard error: its job's output.
  Start();
  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  absl::Mutex mutex;
  std::string printed;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      auto client = client::Client::Connect(daemon_.target());
      for (int j = 0; j < 10; ++j) {
        auto result = (*client)->TimeEvaluate(Call("records_interval"));
        if (!result.ok()) ++failures;
        absl::MutexLock lock(&mutex);
        if (result.ok()) printed += result->output().tail();
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures, 0);
  std::vector<std::pair<int64_t, int64_t>> spans;
  std::istringstream in(printed);
  for (std::string line; std::getline(in, line);) {
    int64_t start = 0, end = 0;
    if (std::sscanf(line.c_str(), "interval %" SCNd64 " %" SCNd64, &start, &end) == 2) {
      spans.emplace_back(start, end);
    }
  }
  ASSERT_EQ(spans.size(), 160u);  // 80 jobs, each a discarded first call and one timed call
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    ASSERT_GE(spans[i].first, spans[i - 1].second) << "two calls overlapped";
  }
}

TEST_F(ReliabilityTest, InputLimitsHaveClearErrors) {
  Start({"--max-modules", "1"});
  v1::TimeEvaluateRequest many = Call("succeeds");
  for (int i = 0; i < 300; ++i) many.mutable_call()->add_args("int8");
  EXPECT_THAT(client_->TimeEvaluate(many).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "300 arguments (limit 256)"));
  EXPECT_THAT(Run(std::string(300, 'f')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("function name of 300")));
  v1::TimeEvaluateRequest long_spec = Call("succeeds");
  long_spec.mutable_call()->add_args("float32[" + std::string(2000, '1') + "]");
  EXPECT_THAT(client_->TimeEvaluate(long_spec).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("argument spec of 2009")));
  EXPECT_THAT(client_->LoadModule(testing::ReadFileBytes(TestModulePath("vector_add")),
                                  std::string(300, 'n')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("module name of 300")));
  // Past gRPC's message limit (16 MiB): refused before it is parsed.
  v1::TimeEvaluateRequest huge = Call("succeeds");
  huge.mutable_call()->add_args(std::string(17 << 20, '1'));
  EXPECT_THAT(client_->TimeEvaluate(huge).status(), StatusIs(absl::StatusCode::kResourceExhausted));
  // One module at most: a second one evicts the first.
  auto second = client_->LoadModuleFile(TestModulePath("vector_add"));
  ASSERT_THAT(second, IsOk());
  EXPECT_THAT(client_->HasModule(faults_), ::kprof::testing::IsOkAndHolds(false));
}

// 32 clients x 50 jobs, mixing good, crashing, hanging and malformed requests: every request
// gets the right code, the daemon stays up, no worker leaks, memory stays flat.
TEST_F(ReliabilityTest, LoadTestMixingEveryKindOfJob) {
  Start();
  for (int i = 0; i < 20; ++i) ASSERT_THAT(Run("succeeds"), IsOk());  // warm up
  const int64_t rss_before = ResidentKb(daemon_.pid());
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      auto client = *client::Client::Connect(daemon_.target());
      for (int j = 0; j < 50; ++j) {
        const int kind = (c * 50 + j) % 50;
        absl::StatusCode expected = absl::StatusCode::kOk;
        v1::TimeEvaluateRequest request = Call("succeeds");
        absl::Duration timeout = absl::Seconds(60);
        if (kind < 5) {
          request = Call("segfault");
          expected = absl::StatusCode::kAborted;
        } else if (kind == 5) {
          request = Call("hangs");
          timeout = absl::Milliseconds(300);
          expected = absl::StatusCode::kDeadlineExceeded;
        } else if (kind < 12) {
          request.mutable_call()->add_args("float32[oops]");
          expected = absl::StatusCode::kInvalidArgument;
        } else if (kind < 15) {
          request = Call("no_such_function");
          expected = absl::StatusCode::kNotFound;
        }
        const absl::Status status = client->TimeEvaluate(request, timeout).status();
        if (status.code() != expected) {
          ++wrong;
          ADD_FAILURE() << "kind " << kind << ": " << status;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_THAT(Run("succeeds"), IsOk());  // still up
  EXPECT_LE(ChildrenOf(daemon_.pid()).size(), 1u);
  const int64_t rss_after = ResidentKb(daemon_.pid());
#if defined(__SANITIZE_THREAD__)
  constexpr int64_t kGrowthKb = 256 * 1024;  // ThreadSanitizer's shadow and history memory
#elif defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps freed memory in its quarantine (256 MB by default) to catch uses
  // after free: the churn of 160 crashed workers' state stays resident. Leaks are LeakSanitizer's
  // to find, at the daemon's exit.
  constexpr int64_t kGrowthKb = (256 + 64) * 1024;
#else
  constexpr int64_t kGrowthKb = 64 * 1024;
#endif
  EXPECT_LT(rss_after - rss_before, kGrowthKb) << rss_before << " kB -> " << rss_after << " kB";
}

}  // namespace
}  // namespace kprof

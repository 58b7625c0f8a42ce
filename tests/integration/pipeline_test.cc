// Pipelined workers: a client's jobs handed several deep to its worker. A real kprofd on
// 127.0.0.1:0, real workers, clients told apart by their tokens' labels; the jobs come from
// tests/modules/faults.c, whose records_interval functions write each call's interval to the
// worker's standard error, which --log-worker-output copies into the daemon's log, so that the
// order of what ran can be read back.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "module_files.h"
#include "processes.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::ChildrenOf;
using ::kprof::testing::ConnectAs;
using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::kprof::testing::WriteTokenFile;
using ::testing::HasSubstr;

struct Interval {
  std::string tag;  // "interval" or "marked"
  int64_t start = 0, end = 0;
};

// Every field of the environment manifest, the host's part the same on every result: `host`
// holds it as the first result had it.
void ExpectWholeEnvironment(const v1::TimeEvaluateResponse& result, const std::string& what,
                            std::map<std::string, std::string>& host) {
  const auto& m = result.environment().metrics();
  for (const char* key : {"kprofd version", "Host", "Kernel", "CPU model", "CPUs online",
                          "CPU governor", "CPU frequency (MHz)", "SMT", "Turbo", "Load average",
                          "Runnable processes", "Worker CPU affinity", "Worker priority"}) {
    EXPECT_EQ(m.count(key), 1u) << what << " lacks " << key;
  }
  for (const char* key : {"kprofd version", "Host", "Kernel", "CPU model", "SMT", "Turbo"}) {
    if (m.count(key) == 0) continue;
    const std::string& value = m.at(key).string();
    EXPECT_FALSE(value.empty()) << what << ": " << key;
    EXPECT_EQ(host.emplace(key, value).first->second, value) << what << ": " << key;
  }
}

class PipelineTest : public ::testing::Test {
 protected:
  void Start(int clients, std::vector<std::string> extra = {}) {
    // The workers' output (the intervals) into the log, as it comes, every worker's in one file.
    extra.insert(extra.end(), {"--token-file", WriteTokenFile(dir_.path(), clients),
                               "--log-worker-output", "1M"});
    daemon_.set_stderr(log_);
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", extra));
    for (int i = 0; i < clients; ++i) {
      auto connected = ConnectAs(daemon_.target(), i);
      ASSERT_THAT(connected, IsOk());
      clients_.push_back(*std::move(connected));
      auto faults = clients_.back()->LoadModuleFile(TestModulePath("faults"));
      ASSERT_THAT(faults, IsOk());
      faults_ = faults->id();
    }
  }

  // `spin_us`: how long each call of a records_interval function spins (default 200 us).
  v1::TimeEvaluateRequest Call(const std::string& function, double spin_us = 0) const {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(faults_);
    request.mutable_call()->set_function(function);
    if (spin_us > 0) request.mutable_call()->add_args(absl::StrCat("float64:", spin_us));
    request.set_number(1);
    request.set_repeat(1);
    return request;
  }

  v1::BatchJob Job(const std::string& id, const std::string& function, double spin_us = 0) const {
    v1::BatchJob job;
    job.set_id(id);
    *job.mutable_time_evaluate() = Call(function, spin_us);
    return job;
  }

  // Each job's final update, by id.
  std::map<std::string, v1::BatchUpdate> Batch(int client, const std::vector<v1::BatchJob>& jobs) {
    std::map<std::string, v1::BatchUpdate> finals;
    const absl::Status status = clients_[client]->MeasureBatch(
        jobs,
        [&](const v1::BatchUpdate& u) {
          if (u.state() == v1::BatchUpdate::DONE || u.state() == v1::BatchUpdate::FAILED) {
            EXPECT_TRUE(finals.emplace(u.id(), u).second) << u.id() << " answered twice";
          }
        },
        {}, 1000);
    EXPECT_THAT(status, IsOk());
    return finals;
  }

  std::vector<Interval> Intervals() const {
    std::vector<Interval> found;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) {
      const size_t printed = line.find(": ", line.find(" worker "));  // "cpu:0 worker 12: ..."
      if (printed == std::string::npos) continue;
      char tag[16] = {0};
      Interval i;
      if (std::sscanf(line.c_str() + printed + 2, "%15s %" SCNd64 " %" SCNd64, tag, &i.start,
                      &i.end) == 3 &&
          (std::string(tag) == "interval" || std::string(tag) == "marked")) {
        i.tag = tag;
        found.push_back(i);
      }
    }
    std::sort(found.begin(), found.end(),
              [](const Interval& a, const Interval& b) { return a.start < b.start; });
    return found;
  }

  // The daemon's log less the intervals, for failure messages.
  std::string DaemonLog() const {
    std::ifstream in(log_);
    std::string text;
    for (std::string line; std::getline(in, line);) {
      const bool interval = line.find(": interval ") != std::string::npos ||
                            line.find(": marked ") != std::string::npos;
      if (!interval) text += line + "\n";
    }
    return text;
  }

  // A failed test shows what the daemon said (a sanitizer's report of why it ended, say).
  void TearDown() override {
    if (HasFailure()) std::cerr << "kprofd's log:\n" << DaemonLog();
  }

  v1::DeviceInfo Cpu() {
    auto info = clients_[0]->Info();
    EXPECT_THAT(info, IsOk());
    return info.ok() ? info->devices(0) : v1::DeviceInfo();
  }

  TempDir dir_;
  const std::string log_ = dir_.path() + "/kprofd.log";
  Daemon daemon_;
  std::vector<std::unique_ptr<client::Client>> clients_;
  std::string faults_;
};

// Every way a job can end its worker, each with jobs handed on behind it: the job fails, named
// as the unary call names it; the ones behind it run on a fresh worker and succeed.
TEST_F(PipelineTest, AJobThatEndsItsWorkerFailsAloneAndTheJobsBehindItRun) {
  Start(1, {"--job-timeout", "2s"});
  const std::pair<const char*, std::string> faults[] = {
      {"segfault", "function 'segfault' crashed: worker killed by SIGSEGV"},
      {"aborts", "killed by SIGABRT"},
      {"divides_by_zero", "killed by SIGFPE"},
      {"bus_error", "killed by SIGBUS"},
      {"illegal_instruction", "killed by SIGILL"},
      {"overflows_stack", "killed by SIGSEGV"},
      {"calls_exit", "worker exited with status 3"},
      {"calls_underscore_exit", "worker exited with status 4"},
      {"closes_streams", "closed the worker's standard streams (0, 1, 2); its worker was replaced"},
      {"leaves_thread", "thread(s) running; its worker was replaced"},
      {"hangs", "the job ran 2s (the daemon's --job-timeout) and was stopped"},
  };
  std::vector<v1::BatchJob> jobs;
  for (const auto& [function, message] : faults) {
    for (int i = 0; i < 3; ++i)
      jobs.push_back(Job(absl::StrCat(function, "-before-", i), "succeeds"));
    jobs.push_back(Job(function, function));
    for (int i = 0; i < 5; ++i)
      jobs.push_back(Job(absl::StrCat(function, "-after-", i), "succeeds"));
  }
  const std::map<std::string, v1::BatchUpdate> finals = Batch(0, jobs);
  ASSERT_EQ(finals.size(), jobs.size());
  for (const auto& [function, message] : faults) {
    const v1::BatchUpdate& failed = finals.at(function);
    EXPECT_EQ(failed.state(), v1::BatchUpdate::FAILED) << function;
    EXPECT_THAT(failed.message(), HasSubstr(message)) << function;
  }
  std::map<std::string, std::string> host;
  for (const v1::BatchJob& job : jobs) {
    if (job.time_evaluate().call().function() != "succeeds") continue;
    EXPECT_EQ(finals.at(job.id()).state(), v1::BatchUpdate::DONE)
        << job.id() << ": " << finals.at(job.id()).message();
    // Whole, on the first job of each fresh worker and on the ones after it (a worker sends
    // the host's part of the manifest once; the front adds it to each result).
    ExpectWholeEnvironment(finals.at(job.id()).time_evaluate(), job.id(), host);
  }
  // A fresh worker for each fault, and one to begin with.
  EXPECT_EQ(Cpu().workers_started(), static_cast<int64_t>(std::size(faults)) + 1);
  EXPECT_EQ(Cpu().jobs_failed(), static_cast<int64_t>(std::size(faults)));
}

// Jobs handed to the worker behind a long one, whose deadline passes or whose client cancels:
// they are answered at once and never run, and the long one is not disturbed.
TEST_F(PipelineTest, AJobHandedOnThatExpiresOrIsCancelledNeverRuns) {
  Start(1);
  v1::TimeEvaluateRequest long_job = Call("records_marked_interval");
  long_job.set_number(2000);  // some 0.4 s of calls
  absl::StatusOr<v1::TimeEvaluateResponse> long_result;
  std::thread running([&] { long_result = clients_[0]->TimeEvaluate(long_job); });
  for (int i = 0; i < 500 && !Cpu().busy(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(Cpu().busy());
  // Handed to the same worker behind it (the client has the device alone), then past their
  // deadlines while the long job runs.
  std::vector<std::thread> expiring;
  std::vector<absl::Status> expired(4);
  std::vector<absl::Duration> took(4);
  for (int i = 0; i < 4; ++i) {
    expiring.emplace_back([&, i] {
      const absl::Time start = absl::Now();
      expired[static_cast<size_t>(i)] =
          clients_[0]->TimeEvaluate(Call("records_interval"), absl::Milliseconds(150)).status();
      took[static_cast<size_t>(i)] = absl::Now() - start;
    });
  }
  // And a batch of them, cancelled while the long job runs.
  {
    grpc::ClientContext context;
    auto stub = v1::Profiler::NewStub(
        grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials()));
    context.AddMetadata("authorization", "Bearer token-0");
    auto stream = stub->MeasureBatch(&context);
    v1::BatchRequest request;
    for (int i = 0; i < 6; ++i) *request.add_jobs() = Job(absl::StrCat("c", i), "records_interval");
    ASSERT_TRUE(stream->Write(request));
    v1::BatchUpdate update;
    int queued = 0;
    while (queued < 6 && stream->Read(&update)) {
      for (const v1::BatchUpdate& u : client::Unpack(update)) queued += u.state() == u.QUEUED;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    context.TryCancel();
    EXPECT_THAT(client::FromGrpcStatus(stream->Finish()), StatusIs(absl::StatusCode::kCancelled));
  }
  for (auto& t : expiring) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(expired[static_cast<size_t>(i)], StatusIs(absl::StatusCode::kDeadlineExceeded));
    EXPECT_LT(took[static_cast<size_t>(i)], absl::Milliseconds(300)) << "waited for the long job";
  }
  running.join();
  ASSERT_THAT(long_result, IsOk());
  EXPECT_EQ(long_result->seconds_per_call_size(), 1);
  EXPECT_TRUE(Cpu().queue_length() == 0);
  // Only the long job's calls ran: the one discarded and the 2000 timed.
  const std::vector<Interval> intervals = Intervals();
  EXPECT_EQ(std::count_if(intervals.begin(), intervals.end(),
                          [](const Interval& i) { return i.tag == "interval"; }),
            0);
  EXPECT_EQ(intervals.size(), 2001u);
  // The same worker goes on.
  EXPECT_THAT(clients_[0]->TimeEvaluate(Call("succeeds")), IsOk());
  EXPECT_EQ(Cpu().workers_started(), 1) << DaemonLog();
}

// Four clients' batches at once, each pipelined when it has the device: no two calls overlap.
TEST_F(PipelineTest, NoTwoMeasurementsOverlapWhenClientsPipelineAtOnce) {
  Start(4);
  std::vector<std::thread> streams;
  std::vector<size_t> done(4);
  for (int c = 0; c < 4; ++c) {
    streams.emplace_back([&, c] {
      std::vector<v1::BatchJob> jobs;
      for (int j = 0; j < 40; ++j) jobs.push_back(Job(absl::StrCat("j", j), "records_interval"));
      for (const auto& [id, u] : Batch(c, jobs))
        done[static_cast<size_t>(c)] += u.state() == u.DONE;
    });
  }
  for (auto& t : streams) t.join();
  for (size_t d : done) EXPECT_EQ(d, 40u);
  const std::vector<Interval> intervals = Intervals();
  ASSERT_EQ(intervals.size(), 4u * 40 * 2);  // a discarded call and a timed one per job
  for (size_t i = 1; i < intervals.size(); ++i) {
    ASSERT_GE(intervals[i].start, intervals[i - 1].end) << "two calls overlapped";
  }
  EXPECT_EQ(Cpu().workers(), 4);
}

// One client's 5000-job batch has the device; another client's single job waits for at most
// two of them: the one running and at most one more. The jobs handed on beyond are taken back
// and run after it, none lost.
//
// Each of the batch's calls spins 600 us, so that a job (two calls) outlasts the millisecond a
// thread the daemon wakes may wait for a CPU on a busy 2-CPU host: the bound is in jobs, not in
// the daemon's reaction time.
TEST_F(PipelineTest, AnotherClientsJobWaitsForAtMostTwoJobsOfALongBatch) {
  Start(2);
  constexpr int kJobs = 5000;
  std::vector<v1::BatchJob> jobs;
  for (int j = 0; j < kJobs; ++j) {
    jobs.push_back(Job(absl::StrCat("j", j), "records_interval", /*spin_us=*/600));
  }
  std::map<std::string, v1::BatchUpdate> finals;
  std::thread batch([&] { finals = Batch(0, jobs); });
  // Several times over while the batch runs: each time the pipeline is full again. When the
  // daemon queued the job: its first call's start less its queue wait (which ends as the job
  // goes to the worker, a little before that call).
  std::vector<double> queue_waits;
  std::map<std::string, std::string> host;
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(round == 0 ? 300 : 100));
    auto marked = clients_[1]->TimeEvaluate(Call("records_marked_interval"));
    ASSERT_THAT(marked, IsOk());
    queue_waits.push_back(marked->timing().queue_wait_seconds());
    ExpectWholeEnvironment(*marked, absl::StrCat("client 1's job ", round), host);
  }
  batch.join();
  ASSERT_EQ(finals.size(), static_cast<size_t>(kJobs));
  for (const auto& [id, u] : finals) {
    ASSERT_EQ(u.state(), v1::BatchUpdate::DONE) << id;
    ExpectWholeEnvironment(u.time_evaluate(), id, host);
  }
  const std::vector<Interval> intervals = Intervals();
  ASSERT_EQ(intervals.size(), 2u * (kJobs + 5));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr int kMaxCallsBefore = 20;
#else
  constexpr int kMaxCallsBefore = 5;
#endif
  size_t round = 0;
  for (size_t i = 0; i < intervals.size(); ++i) {
    if (intervals[i].tag != "marked") continue;
    // The marked job's discarded call; its timed call follows at once.
    ASSERT_LT(round, queue_waits.size());
    ASSERT_LT(i + 1, intervals.size());
    EXPECT_EQ(intervals[i + 1].tag, "marked");
    const int64_t queued = intervals[i].start - static_cast<int64_t>(queue_waits[round] * 1e9);
    int others = 0;
    for (size_t k = 0; k < i; ++k) {
      others += intervals[k].tag == "interval" && intervals[k].start > queued;
    }
    // Calls of the batch begun after the job was queued: the running job's second (at most),
    // and the next job's two. The thread that queued the job tells the worker to yield, so the
    // executor's thread waiting for a CPU on a busy host costs nothing here. One more job's two
    // calls where that send cannot go at once (a job being handed on at that moment: the yield
    // follows it; a full socket: the executor's Withdraw does it). Under a sanitizer each step of
    // the front is several times slower and the batch's calls (a busy wait) are not: ten jobs.
    EXPECT_LE(others, kMaxCallsBefore)
        << "round " << round << ": the other client's job waited " << queue_waits[round] * 1e3
        << " ms, for " << others << " calls of the batch";
    ++round;
    ++i;
  }
  EXPECT_EQ(round, queue_waits.size());
  EXPECT_EQ(Cpu().workers_started(), 2);
}

// The quick path (kprofd --busy-poll, on by default where the daemon has two CPUs): a unary
// job that finds the device idle and its client's worker waiting is sent, and answered, by the
// thread that took the call. Client 0 alone first, then two clients at once, each calling four
// modules that share one entry point round and round: every answer is the code of the module
// asked for, whichever path it took; the jobs longer than the busy poll (gemm, 2 ms and more)
// are handed to the executor's thread, which times them right; every job is counted once.
TEST_F(PipelineTest, QuickAnswersAreEachModulesOwn) {
  Start(2);
  std::vector<std::vector<std::string>> ids(2);
  for (int c = 0; c < 2; ++c) {
    for (int k = 1; k <= 4; ++k) {
      auto loaded = clients_[c]->LoadModuleFile(TestModulePath(absl::StrCat("candidate_", k)));
      ASSERT_THAT(loaded, IsOk());
      ids[c].push_back(loaded->id());
    }
  }
  constexpr int kCalls = 80;
  const auto calls = [&](int c) {
    for (int i = 0; i < kCalls; ++i) {
      const int k = (i + c) % 4;  // the module's K: `candidate` returns it, gemm takes 2K ms
      v1::TimeEvaluateRequest request;
      request.mutable_call()->set_module_id(ids[c][k]);
      request.set_number(1);
      request.set_repeat(1);
      if (i % 10 == 9) {
        request.mutable_call()->set_function("gemm");
        auto timed = clients_[c]->TimeEvaluate(request);
        ASSERT_THAT(timed, IsOk());
        const double ms = timed->seconds_per_call(0) * 1e3;
        EXPECT_GE(ms, 2.0 * (k + 1)) << "client " << c << ", candidate_" << k + 1;
        EXPECT_LT(ms, 2.0 * (k + 1) + 20) << "client " << c << ", candidate_" << k + 1;
      } else {
        request.mutable_call()->set_function("candidate");
        EXPECT_THAT(
            clients_[c]->TimeEvaluate(request),
            StatusIs(absl::StatusCode::kAborted, HasSubstr(absl::StrCat("returned ", k + 1))))
            << "client " << c << ", call " << i;
      }
    }
  };
  calls(0);  // alone: each job finds the device idle and the worker its own
  auto alone = clients_[0]->Info();
  ASSERT_THAT(alone, IsOk());
  std::vector<std::thread> callers;
  for (int c = 0; c < 2; ++c) callers.emplace_back(calls, c);
  for (auto& t : callers) t.join();
  auto info = clients_[0]->Info();
  ASSERT_THAT(info, IsOk());
  const v1::DeviceInfo& cpu = info->devices(0);
  EXPECT_EQ(cpu.jobs_completed(), 3 * kCalls / 10);
  EXPECT_EQ(cpu.jobs_failed(), 3 * kCalls - 3 * kCalls / 10);
  EXPECT_LE(cpu.jobs_quick(), cpu.jobs_completed() + cpu.jobs_failed());
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) >= 2) {
    EXPECT_EQ(info->limits().busy_poll_us(), 250);
    EXPECT_GT(alone->devices(0).jobs_quick(), 0) << "no job of a client alone took the quick path";
  } else {
    EXPECT_EQ(info->limits().busy_poll_us(), 0) << "a busy poll on one CPU only delays";
    EXPECT_EQ(cpu.jobs_quick(), 0);
  }
  EXPECT_EQ(cpu.workers_started(), 2);
}

// --busy-poll 0: every job goes through the executor's thread, none on the quick path; bad
// values are refused at start, naming what is accepted.
TEST_F(PipelineTest, TheBusyPollCanBeTurnedOff) {
  Start(1, {"--busy-poll", "0"});
  for (int i = 0; i < 20; ++i)
    ASSERT_THAT(clients_[0]->TimeEvaluate(Call("records_interval")), IsOk());
  auto info = clients_[0]->Info();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->limits().busy_poll_us(), 0);
  EXPECT_EQ(info->devices(0).jobs_completed(), 20);
  EXPECT_EQ(info->devices(0).jobs_quick(), 0);
  for (const char* bad : {"11ms", "-1us", "soon"}) {
    Daemon refused;
    refused.set_stderr(dir_.path() + "/refused.log");
    EXPECT_FALSE(refused.Start(dir_.path() + "/cache2", {"--busy-poll", bad})) << bad;
    std::ifstream in(dir_.path() + "/refused.log");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_THAT(text, HasSubstr("busy-poll")) << bad;
  }
}

// CPU ticks (user and system) a process has used, from /proc/PID/stat.
int64_t CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  int64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return utime + stime;
}

// A worker that has answered polls for its client's next job; when another client's job is to
// run first, it is told to stop (a Park), so that it does not spin beside a measurement. With a
// 10 ms busy poll, client 0's worker would spend 10 ms of CPU after each of its jobs; with
// client 1's job right behind each, it spends a fraction of that.
TEST_F(PipelineTest, AWorkerPollingForItsNextJobStopsWhenAnotherClientsRuns) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "no busy poll on one CPU";
  Start(2, {"--busy-poll", "10ms"});
  ASSERT_THAT(clients_[0]->TimeEvaluate(Call("records_interval")), IsOk());
  const std::vector<pid_t> first = ChildrenOf(daemon_.pid());
  ASSERT_EQ(first.size(), 1u);
  ASSERT_THAT(clients_[1]->TimeEvaluate(Call("records_interval")), IsOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its poll is long over
  const int64_t before = CpuTicks(first[0]);
  constexpr int kRounds = 30;
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_THAT(clients_[0]->TimeEvaluate(Call("records_interval")), IsOk());
    ASSERT_THAT(clients_[1]->TimeEvaluate(Call("records_interval")), IsOk());
    std::this_thread::sleep_for(std::chrono::milliseconds(15));  // past any poll
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double spent_ms = static_cast<double>(CpuTicks(first[0]) - before) * 1e3 /
                          static_cast<double>(sysconf(_SC_CLK_TCK));
  // Unparked, it would poll for 10 ms after each of its jobs: 300 ms beside the jobs' own CPU
  // time, which under AddressSanitizer alone comes near 100 ms (seen: 100 ms once in CI).
  EXPECT_LT(spent_ms, kRounds * 10 / 2) << "client 0's worker kept polling";
  // Client 1's jobs were each the last: its worker polls after every one, unparked.
  EXPECT_EQ(Cpu().workers_started(), 2);
}

}  // namespace
}  // namespace kprof

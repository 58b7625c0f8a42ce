// The executor's scheduling with runners that are threads of this process: each job "runs" for
// the time its script says, crashes its runner or hangs, so turns, pipelining, cancels,
// deadlines, crashes and draining are tested without processes, gRPC or a device.
#include "server/front/scheduling/device_executor.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kprof::server {
namespace {

using kprof::worker::v1::WorkerAnswer;
using kprof::worker::v1::WorkerRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Script {
  absl::Duration runs = absl::Milliseconds(2);
  bool crashes = false;  // the runner ends at the end of the job, without an answer
  bool hangs = false;    // the job never ends
};

// What the runners share with the test: the scripts, and what they saw.
struct Bench {
  std::mutex mutex;
  std::map<uint64_t, Script> scripts;
  std::vector<uint64_t> started;  // job ids, in the order they began to run
  int runners_started = 0;
  int runners_alive = 0;
  int most_alive = 0;
  size_t most_held = 0;  // jobs a runner held at once, the running one included
  std::vector<std::thread::id> yielded_from;  // the threads that asked a runner to yield

  Script ScriptOf(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    return scripts[id];
  }
  size_t MostHeld() {
    std::lock_guard<std::mutex> lock(mutex);
    return most_held;
  }
  std::vector<uint64_t> Started() {
    std::lock_guard<std::mutex> lock(mutex);
    return started;
  }
};

class FakeRunner final : public JobRunner {
 public:
  explicit FakeRunner(Bench* bench) : bench_(bench), fd_(eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE)) {
    {
      std::lock_guard<std::mutex> lock(bench_->mutex);
      ++bench_->runners_started;
      bench_->most_alive = std::max(bench_->most_alive, ++bench_->runners_alive);
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeRunner() override {
    (void)Kill();
    close(fd_);
  }

  absl::Status SendMany(absl::Span<const FrameChannel::Outgoing> frames) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return absl::UnavailableError("the runner ended");
    for (const FrameChannel::Outgoing& frame : frames) {
      const auto& request = static_cast<const WorkerRequest&>(*frame.message);
      if (request.has_withdraw()) {
        // As a worker does: read between jobs, after the running one's answer.
        for (const uint64_t id : request.withdraw().job_ids()) withdrawn_.push_back(id);
      } else if (!request.has_park()) {
        pending_.push_back(request);
        std::lock_guard<std::mutex> bench_lock(bench_->mutex);
        bench_->most_held = std::max(bench_->most_held, pending_.size() + (running_ ? 1 : 0));
      }
    }
    wake_.notify_all();
    return absl::OkStatus();
  }

  absl::StatusOr<WorkerAnswer> Receive() override {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [this] { return !answers_.empty() || ended_; });
    if (answers_.empty()) return absl::AbortedError("the runner crashed");
    WorkerAnswer answer = std::move(answers_.front());
    answers_.pop_front();
    uint64_t one = 0;
    (void)!read(fd_, &one, sizeof one);
    return answer;
  }
  bool HasAnswer() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return !answers_.empty() || ended_;
  }
  bool PollAnswer() override { return HasAnswer(); }
  bool TryYield() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ended_) return false;
      yield_ = true;
      std::lock_guard<std::mutex> bench_lock(bench_->mutex);
      bench_->yielded_from.push_back(std::this_thread::get_id());
    }
    wake_.notify_all();
    return true;
  }
  int fd() const override { return fd_; }
  std::string Kill() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ended_) End();
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    return "killed";
  }
  bool alive() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return !ended_;
  }
  pid_t pid() const override { return -1; }
  bool HoldsModulesOf(const WorkerRequest&) const override { return false; }
  void HandedOn(const WorkerRequest&) override {}

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock,
                 [this] { return !pending_.empty() || !withdrawn_.empty() || yield_ || ended_; });
      if (ended_) return;
      // A yield, as a worker takes it: the next job stays, the ones behind it go back.
      if (std::exchange(yield_, false)) {
        for (size_t i = 1; i < pending_.size(); ++i) withdrawn_.push_back(pending_[i].job_id());
      }
      // Withdrawn jobs not begun are answered so, the latest first: the executor puts each back
      // in its place whatever order they come in.
      for (auto id = withdrawn_.rbegin(); id != withdrawn_.rend(); ++id) {
        const auto it = std::find_if(pending_.begin(), pending_.end(),
                                     [&](const WorkerRequest& r) { return r.job_id() == *id; });
        if (it == pending_.end()) continue;  // ran already: answered as usual
        pending_.erase(it);
        WorkerAnswer answer;
        answer.set_job_id(*id);
        answer.set_withdrawn(true);
        Answer(std::move(answer));
      }
      withdrawn_.clear();
      if (pending_.empty()) continue;
      const WorkerRequest request = std::move(pending_.front());
      pending_.pop_front();
      running_ = true;
      const Script script = bench_->ScriptOf(request.job_id());
      {
        std::lock_guard<std::mutex> bench_lock(bench_->mutex);
        bench_->started.push_back(request.job_id());
      }
      const auto until = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(script.runs);
      if (script.hangs) {
        wake_.wait(lock, [this] { return ended_; });
      } else {
        wake_.wait_until(lock, until, [this] { return ended_; });
      }
      running_ = false;
      if (ended_) return;
      if (script.crashes) {
        End();
        wake_.notify_all();
        return;
      }
      WorkerAnswer answer;
      answer.set_job_id(request.job_id());
      Answer(std::move(answer));
    }
  }
  void Answer(WorkerAnswer answer) {  // mutex_ held
    answers_.push_back(std::move(answer));
    const uint64_t one = 1;
    (void)!write(fd_, &one, sizeof one);
    wake_.notify_all();
  }
  void End() {  // mutex_ held
    ended_ = true;
    const uint64_t one = 1;
    (void)!write(fd_, &one, sizeof one);
    std::lock_guard<std::mutex> bench_lock(bench_->mutex);
    --bench_->runners_alive;
  }

  Bench* bench_;
  const int fd_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<WorkerRequest> pending_;
  std::deque<WorkerAnswer> answers_;
  std::vector<uint64_t> withdrawn_;  // ids to withdraw, read between jobs
  bool yield_ = false;               // asked to yield, read between jobs
  bool running_ = false;
  bool ended_ = false;
  std::thread thread_;
};

// A job's outcome, once its Done has run.
struct Outcome {
  absl::Notification done;
  absl::StatusOr<WorkerAnswer> answer = absl::UnknownError("not answered");
  std::thread::id thread;

  absl::StatusCode code() {
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
    return answer.status().code();
  }
};

class DeviceExecutorTest : public ::testing::Test {
 protected:
  void Start(int max_queue = 100, absl::Duration job_timeout = absl::Seconds(30),
             WorkerPool pool = WorkerPool(), absl::Duration busy_poll = absl::ZeroDuration()) {
    WorkerOptions options;
    options.busy_poll = busy_poll;
    executor_ =
        std::make_unique<DeviceExecutor>(options, max_queue, job_timeout, pool,
                                         [this]() -> absl::StatusOr<std::unique_ptr<JobRunner>> {
                                           return std::make_unique<FakeRunner>(&bench_);
                                         });
  }

  // Submits job `id` of `client`, scripted; its outcome.
  std::shared_ptr<Outcome> Submit(uint64_t id, const std::string& client, Script script = {},
                                  absl::Time deadline = absl::InfiniteFuture(),
                                  absl::Status* refused = nullptr, bool beyond_bound = false,
                                  const std::string& lease = "") {
    {
      std::lock_guard<std::mutex> lock(bench_.mutex);
      bench_.scripts[id] = script;
    }
    auto outcome = std::make_shared<Outcome>();
    WorkerRequest request;
    request.set_job_id(id);
    const absl::Status status = executor_->Submit(
        request, client, deadline,
        [outcome](absl::StatusOr<WorkerAnswer> answer, JobTiming) {
          outcome->answer = std::move(answer);
          outcome->thread = std::this_thread::get_id();
          outcome->done.Notify();
        },
        nullptr, nullptr, beyond_bound, {}, lease);
    if (refused != nullptr) *refused = status;
    if (!status.ok()) {
      outcome->answer = status;
      outcome->done.Notify();
    }
    return outcome;
  }

  // Waits until job `id` has begun to run.
  bool WaitStarted(uint64_t id) {
    for (int i = 0; i < 2000; ++i) {
      const std::vector<uint64_t> started = bench_.Started();
      if (std::find(started.begin(), started.end(), id) != started.end()) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  Bench bench_;
  std::unique_ptr<DeviceExecutor> executor_;
};

TEST_F(DeviceExecutorTest, RunsOneClientsJobsInOrderPipelinedUpToTheDepth) {
  WorkerPool pool;
  pool.pipeline_depth = 4;
  Start(100, absl::Seconds(30), pool);
  std::vector<std::shared_ptr<Outcome>> jobs;
  for (uint64_t id = 1; id <= 12; ++id) jobs.push_back(Submit(id, "a"));
  for (auto& job : jobs) EXPECT_EQ(job->code(), absl::StatusCode::kOk);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(jobs[i]->answer->job_id(), i + 1);
  EXPECT_THAT(bench_.Started(), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
  EXPECT_GT(bench_.most_held, 1u) << "the jobs went one at a time";
  EXPECT_LE(bench_.most_held, 4u) << "more jobs than the depth were handed on";
  EXPECT_EQ(bench_.runners_started, 1);
  EXPECT_EQ(executor_->stats().completed, 12);
  EXPECT_EQ(executor_->stats().workers, 1);
}

TEST_F(DeviceExecutorTest, ANewClientWaitsForTheRunningJobAndOneMoreAtMost) {
  Start();
  std::vector<std::shared_ptr<Outcome>> jobs;
  // The first job runs long enough that a loaded machine still hands the rest on behind it.
  jobs.push_back(Submit(1, "tuner", Script{absl::Seconds(1)}));
  ASSERT_TRUE(WaitStarted(1));
  for (uint64_t id = 2; id <= 7; ++id) {
    jobs.push_back(Submit(id, "tuner", Script{absl::Milliseconds(20)}));
  }
  // The tuner's jobs are handed on behind the first before the user's comes: all of them when
  // the loop sees them queued together, or, arriving one by one on a slow machine (ASan), until
  // the pipeline is half full — beyond the two a newcomer may wait for, either way.
  for (int i = 0; i < 800 && bench_.MostHeld() < 7; ++i) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_GE(bench_.MostHeld(), 4u) << "the tuner's jobs were not handed on together";
  jobs.push_back(Submit(8, "user"));
  ASSERT_EQ(bench_.Started().size(), 1u) << "the first job ended before the user's came";
  for (auto& job : jobs) EXPECT_EQ(job->code(), absl::StatusCode::kOk);
  const std::vector<uint64_t> started = bench_.Started();
  const auto user = std::find(started.begin(), started.end(), 8u);
  ASSERT_NE(user, started.end());
  // Behind the running job and the one next to it; the five after those were taken back, asked
  // of the tuner's runner by the thread that queued the user's job, not the executor's.
  EXPECT_EQ(user - started.begin(), 2) << "the user's job waited behind other than two";
  EXPECT_THAT(bench_.yielded_from, ElementsAre(std::this_thread::get_id()));
  std::vector<uint64_t> tuner;
  for (uint64_t id : started) {
    if (id != 8) tuner.push_back(id);
  }
  EXPECT_THAT(tuner, ElementsAre(1, 2, 3, 4, 5, 6, 7)) << "taken back out of order";
  EXPECT_EQ(bench_.runners_started, 2);  // a worker per client
}

TEST_F(DeviceExecutorTest, ACrashFailsItsJobAloneAndTheRestRunOnAFreshRunner) {
  Start();
  auto first = Submit(1, "a", Script{absl::Milliseconds(20), /*crashes=*/true});
  auto second = Submit(2, "a");
  auto third = Submit(3, "a");
  EXPECT_EQ(first->code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(first->answer.status().message()), HasSubstr("crashed"));
  EXPECT_EQ(second->code(), absl::StatusCode::kOk);
  EXPECT_EQ(third->code(), absl::StatusCode::kOk);
  EXPECT_EQ(bench_.runners_started, 2);
  EXPECT_EQ(executor_->stats().failed, 1);
  EXPECT_EQ(executor_->stats().completed, 2);
}

TEST_F(DeviceExecutorTest, CancelTakesAQueuedJobOutAndStopsARunningOne) {
  Start();
  auto running = Submit(1, "a", Script{absl::ZeroDuration(), false, /*hangs=*/true});
  ASSERT_TRUE(WaitStarted(1));
  auto queued = Submit(2, "a");
  auto after = Submit(3, "a");
  executor_->Cancel(2);
  EXPECT_EQ(queued->code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(queued->answer.status().message()), HasSubstr("left the queue"));
  executor_->Cancel(1);
  EXPECT_EQ(running->code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(running->answer.status().message()), HasSubstr("stopped"));
  EXPECT_EQ(after->code(), absl::StatusCode::kOk);
  EXPECT_THAT(bench_.Started(), ElementsAre(1, 3));
  EXPECT_EQ(bench_.runners_started, 2);  // the stopped one replaced
  executor_->Cancel(42);                 // unknown: nothing happens
}

TEST_F(DeviceExecutorTest, AJobWhoseDeadlinePassesWhileItWaitsNeverRuns) {
  Start();
  auto slow = Submit(1, "a", Script{absl::Milliseconds(150)});
  ASSERT_TRUE(WaitStarted(1));
  auto late = Submit(2, "a", Script{}, absl::Now() + absl::Milliseconds(30));
  auto next = Submit(3, "a");
  EXPECT_EQ(late->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(late->answer.status().message()), HasSubstr("while the job waited"));
  EXPECT_FALSE(slow->done.HasBeenNotified()) << "the late job was answered only after the slow one";
  EXPECT_EQ(slow->code(), absl::StatusCode::kOk);
  EXPECT_EQ(next->code(), absl::StatusCode::kOk);
  EXPECT_THAT(bench_.Started(), ElementsAre(1, 3));
}

TEST_F(DeviceExecutorTest, TheJobTimeoutStopsAHangAndTheNextJobRuns) {
  Start(100, absl::Milliseconds(100));
  auto hang = Submit(1, "a", Script{absl::ZeroDuration(), false, /*hangs=*/true});
  auto next = Submit(2, "a");
  EXPECT_EQ(hang->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(hang->answer.status().message()), HasSubstr("--job-timeout"));
  EXPECT_EQ(next->code(), absl::StatusCode::kOk);
  EXPECT_EQ(bench_.runners_started, 2);
}

TEST_F(DeviceExecutorTest, TheQueueIsBoundedPerClient) {
  Start(/*max_queue=*/2);
  auto running = Submit(1, "a", Script{absl::ZeroDuration(), false, /*hangs=*/true});
  ASSERT_TRUE(WaitStarted(1));
  auto second = Submit(2, "a");
  auto third = Submit(3, "a");
  absl::Status refused;
  auto fourth = Submit(4, "a", Script{}, absl::InfiniteFuture(), &refused);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("limit 2 per client"));
  absl::Status other;
  auto theirs = Submit(5, "b", Script{}, absl::InfiniteFuture(), &other);
  EXPECT_TRUE(other.ok()) << "one client's flood filled the queue for another: " << other;
  executor_->Cancel(1);
  EXPECT_EQ(running->code(), absl::StatusCode::kCancelled);
  for (auto* job : {&second, &third, &theirs}) EXPECT_EQ((*job)->code(), absl::StatusCode::kOk);
}

TEST_F(DeviceExecutorTest, PastTheBoundOnWorkersTheIdlestEnds) {
  WorkerPool pool;
  pool.max_workers = 1;
  Start(100, absl::Seconds(30), pool);
  EXPECT_EQ(Submit(1, "a")->code(), absl::StatusCode::kOk);
  EXPECT_EQ(Submit(2, "b")->code(), absl::StatusCode::kOk);
  EXPECT_EQ(Submit(3, "a")->code(), absl::StatusCode::kOk);
  EXPECT_EQ(bench_.runners_started, 3);
  EXPECT_EQ(bench_.most_alive, 1);
  EXPECT_EQ(executor_->stats().workers, 1);
  EXPECT_EQ(executor_->stats().workers_started, 3);
}

TEST_F(DeviceExecutorTest, DrainLetsTheRunningJobFinishAndRefusesTheRest) {
  Start();
  auto running = Submit(1, "a", Script{absl::Milliseconds(500)});
  ASSERT_TRUE(WaitStarted(1));
  auto queued = Submit(2, "a");
  auto other = Submit(3, "b");
  executor_->Drain();
  EXPECT_EQ(running->code(), absl::StatusCode::kOk);
  EXPECT_EQ(queued->code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(other->code(), absl::StatusCode::kUnavailable);
  absl::Status refused;
  (void)Submit(4, "a", Script{}, absl::InfiniteFuture(), &refused);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(bench_.Started(), ElementsAre(1));
}

TEST_F(DeviceExecutorTest, TheClientJustServedGoesAfterTheOthers) {
  WorkerPool pool;
  pool.pipeline_depth = 1;  // one job handed on at a time: every next job is a turn
  Start(100, absl::Seconds(30), pool);
  auto first = Submit(1, "a", Script{absl::Milliseconds(500)});
  ASSERT_TRUE(WaitStarted(1));
  auto again = Submit(2, "a");  // queued before b's, but a has just had its turn
  auto other = Submit(3, "b");
  for (auto* job : {&first, &again, &other}) EXPECT_EQ((*job)->code(), absl::StatusCode::kOk);
  EXPECT_THAT(bench_.Started(), ElementsAre(1, 3, 2));
}

TEST_F(DeviceExecutorTest, JobsBeyondTheBoundDoNotCountAgainstIt) {
  Start(/*max_queue=*/1);
  auto running = Submit(1, "a", Script{absl::ZeroDuration(), false, /*hangs=*/true});
  ASSERT_TRUE(WaitStarted(1));
  absl::Status status;
  auto bounded = Submit(2, "a", Script{}, absl::InfiniteFuture(), &status);
  ASSERT_TRUE(status.ok()) << status;
  // A batch stream's job, which the stream bounds itself: queued though the bound is reached.
  auto beyond = Submit(3, "a", Script{}, absl::InfiniteFuture(), &status, /*beyond_bound=*/true);
  EXPECT_TRUE(status.ok()) << status;
  (void)Submit(4, "a", Script{}, absl::InfiniteFuture(), &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  executor_->Cancel(1);
  EXPECT_EQ(running->code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(bounded->code(), absl::StatusCode::kOk);
  EXPECT_EQ(beyond->code(), absl::StatusCode::kOk);
}

TEST_F(DeviceExecutorTest, AnIdAlreadyQueuedOrRunningIsRefused) {
  Start();
  auto running = Submit(1, "a", Script{absl::Milliseconds(500)});
  ASSERT_TRUE(WaitStarted(1));
  auto queued = Submit(2, "a");
  absl::Status status;
  (void)Submit(2, "b", Script{}, absl::InfiniteFuture(), &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(status.message()), HasSubstr("job id 2 is already queued"));
  (void)Submit(1, "a", Script{}, absl::InfiniteFuture(), &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(running->code(), absl::StatusCode::kOk);
  EXPECT_EQ(queued->code(), absl::StatusCode::kOk);
  EXPECT_THAT(bench_.Started(), ElementsAre(1, 2));
}

TEST_F(DeviceExecutorTest, TheQuickPathAnswersOnTheCallersThread) {
  Start(100, absl::Seconds(30), WorkerPool(), /*busy_poll=*/absl::Milliseconds(200));
  ASSERT_EQ(Submit(1, "a")->code(), absl::StatusCode::kOk);
  // Once the loop sleeps with the client's worker left to the quick path, a job is answered by
  // the thread that submits it, before Submit returns.
  std::shared_ptr<Outcome> quick;
  for (uint64_t id = 2; id < 40 && executor_->stats().quick_jobs == 0; ++id) {
    absl::SleepFor(absl::Milliseconds(10));
    quick = Submit(id, "a");
    ASSERT_EQ(quick->code(), absl::StatusCode::kOk);
  }
  EXPECT_EQ(executor_->stats().quick_jobs, 1);
  EXPECT_EQ(quick->thread, std::this_thread::get_id());
  EXPECT_EQ(bench_.runners_started, 1);
}

// Of any `window` consecutive jobs in the order they began, the fewest each client had, over the
// stretch from the first job of the client that came last to the last job of the one that left
// first: while both had work.
std::map<std::string, int> FewestWhileBothWaited(const std::vector<std::string>& order,
                                                 size_t window) {
  std::map<std::string, size_t> first, last;
  for (size_t i = 0; i < order.size(); ++i) {
    first.emplace(order[i], i);
    last[order[i]] = i;
  }
  size_t begin = 0, end = order.size();
  for (const auto& [client, at] : first) begin = std::max(begin, at);
  for (const auto& [client, at] : last) end = std::min(end, at + 1);
  std::map<std::string, int> fewest;
  for (const auto& [client, at] : first) fewest[client] = static_cast<int>(window);
  for (size_t start = begin; start + window <= end; ++start) {
    std::map<std::string, int> counts;
    for (size_t i = start; i < start + window; ++i) ++counts[order[i]];
    for (auto& [client, n] : fewest) n = std::min(n, counts[client]);
  }
  return fewest;
}

// Two tuners' batch streams on one device, one with many more jobs queued: in the order the
// jobs ran, they alternate by weight — of any 20 consecutive, at least 9 each at equal weights,
// at least 14 and 4 at 3:1.
TEST_F(DeviceExecutorTest, TunersShareTheDeviceByWeightInTheOrderItRunsTheirJobs) {
  for (const int heavy_weight : {1, 3}) {
    Start();
    executor_->SetClientWeights(
        [heavy_weight](const std::string& c) { return c == "eight-streams" ? heavy_weight : 1; });
    {
      std::lock_guard<std::mutex> lock(bench_.mutex);
      bench_.started.clear();
    }
    std::vector<std::shared_ptr<Outcome>> jobs;
    std::map<uint64_t, std::string> client_of;
    const uint64_t base = heavy_weight * 1000;
    for (uint64_t i = 0; i < 400; ++i) {
      // Eight streams of one tuner and one of another, their jobs arriving mixed.
      const std::string client = i % 5 == 4 ? "one-stream" : "eight-streams";
      client_of[base + i] = client;
      jobs.push_back(Submit(base + i, client, Script{absl::Microseconds(200)},
                            absl::InfiniteFuture(), nullptr, /*beyond_bound=*/true));
    }
    for (auto& job : jobs) ASSERT_EQ(job->code(), absl::StatusCode::kOk);
    std::vector<std::string> order;
    for (uint64_t id : bench_.Started()) order.push_back(client_of.at(id));
    ASSERT_EQ(order.size(), 400u);
    const std::map<std::string, int> fewest = FewestWhileBothWaited(order, 20);
    EXPECT_GE(fewest.at("eight-streams"), heavy_weight == 1 ? 9 : 14) << heavy_weight;
    EXPECT_GE(fewest.at("one-stream"), heavy_weight == 1 ? 9 : 4) << heavy_weight;
  }
}

// A call waits behind the running batch job and those handed on with it, not behind the batch
// queue — even the same client's, whose jobs otherwise run in the order they came.
TEST_F(DeviceExecutorTest, AnInteractiveJobGoesAheadOfQueuedBatchJobs) {
  Start();
  std::vector<std::shared_ptr<Outcome>> jobs;
  for (uint64_t id = 1; id <= 30; ++id) {
    jobs.push_back(Submit(id, "tuner", Script{absl::Milliseconds(5)}, absl::InfiniteFuture(),
                          nullptr, /*beyond_bound=*/true));
  }
  ASSERT_TRUE(WaitStarted(1));
  auto user = Submit(100, "tuner");  // a call: interactive
  EXPECT_EQ(user->code(), absl::StatusCode::kOk);
  for (auto& job : jobs) EXPECT_EQ(job->code(), absl::StatusCode::kOk);
  const std::vector<uint64_t> started = bench_.Started();
  const auto at = std::find(started.begin(), started.end(), 100u);
  ASSERT_NE(at, started.end());
  // Behind at most the pipeline handed on before it came (8 jobs), not the 29 queued.
  EXPECT_LE(at - started.begin(), 9) << "the interactive job waited behind the batch queue";
}

}  // namespace
}  // namespace kprof::server

namespace kprof::server {
namespace {

TEST_F(DeviceExecutorTest, ALeaseGateRunsTheLeasesJobsAloneAndEndsWithThem) {
  Start();
  const auto under = [this](uint64_t id, const std::string& lease, Script script = {}) {
    return Submit(id, "alice", script, absl::InfiniteFuture(), nullptr, false, lease);
  };
  const absl::Time ends = absl::Now() + absl::Hours(1);
  const auto gate = [ends](bool open, bool ending) {
    return DeviceExecutor::LeaseGate{
        "alice", "L", open, ending, ending ? absl::Now() : ends, "cpu:0 is leased to alice"};
  };
  // Another client's job runs, two more of its wait behind it.
  auto first = Submit(1, "bob", {absl::Milliseconds(300)});
  auto second = Submit(2, "bob");
  auto third = Submit(3, "bob");
  ASSERT_TRUE(WaitStarted(1));
  absl::Notification clear;
  executor_->SetLease(gate(false, false), [&] { clear.Notify(); });
  ASSERT_TRUE(clear.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(first->done.HasBeenNotified()) << "the gate cleared with bob's job running";
  EXPECT_EQ(first->code(), absl::StatusCode::kOk);
  // A job that would wait past its deadline is refused at once, naming the lease.
  absl::Status refused;
  Submit(4, "bob", {}, absl::Now() + absl::Seconds(10), &refused);
  EXPECT_THAT(refused.message(), HasSubstr("cpu:0 is leased to alice"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kDeadlineExceeded);

  executor_->SetLease(gate(true, false));
  auto leased = under(5, "L");
  auto plain = under(6, "");  // alice's, but not under the lease: it waits
  auto forged = under(7, "M");
  EXPECT_EQ(leased->code(), absl::StatusCode::kOk);
  EXPECT_EQ(forged->code(), absl::StatusCode::kFailedPrecondition);
  auto long_leased = under(8, "L", {absl::Milliseconds(300)});
  auto behind = under(9, "L");
  ASSERT_TRUE(WaitStarted(8));
  absl::Notification ended;
  executor_->SetLease(gate(false, true), [&] { ended.Notify(); });
  // The lease's job queued behind the running one never runs without the lease.
  EXPECT_EQ(behind->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(behind->answer.status().message(), HasSubstr("lease L has ended"));
  ASSERT_TRUE(ended.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(long_leased->code(), absl::StatusCode::kOk);
  EXPECT_FALSE(second->done.HasBeenNotified());
  EXPECT_FALSE(plain->done.HasBeenNotified());
  executor_->SetLease(std::nullopt);
  EXPECT_EQ(second->code(), absl::StatusCode::kOk);
  EXPECT_EQ(third->code(), absl::StatusCode::kOk);
  EXPECT_EQ(plain->code(), absl::StatusCode::kOk);
  const std::vector<uint64_t> started = bench_.Started();
  EXPECT_EQ(std::count(started.begin(), started.end(), 9u), 0);

  // On an idle device the gate clears at once (not at the loop's next idle check, 10 s on).
  absl::SleepFor(absl::Milliseconds(100));
  absl::Notification idle_clear;
  const absl::Time set = absl::Now();
  executor_->SetLease(gate(false, false), [&] { idle_clear.Notify(); });
  ASSERT_TRUE(idle_clear.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_LT(absl::Now() - set, absl::Seconds(2));
  executor_->SetLease(std::nullopt);
}

}  // namespace
}  // namespace kprof::server

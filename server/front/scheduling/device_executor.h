// DeviceExecutor: the jobs of one device, one at a time, run by worker processes of that
// device. Each client (ProfilerService::Authenticate) has a worker of its own: no check can see
// every change a function makes inside its process (a patched timer, a hooked clock_gettime),
// so one client's job never runs in a process another client's code has run in. Only one job
// runs at a time, so measurements never overlap; the queue takes the clients in turn. Workers
// start on their client's first job and stay for the next, up to `max_workers` per device (past
// it, the one idle longest is stopped) and for `idle_timeout` without a job. A bounded queue:
// past `max_queue` waiting jobs of one client, Submit refuses that client's next at once.
//
// Pipelined: while one client alone has work on the device, up to `pipeline_depth` of its jobs
// are handed to its worker at once, which goes from one straight into the next and answers each
// as it ends. When another client's job arrives, the jobs handed on beyond the running one and
// the next are taken back (a Withdraw frame) and queued again in order, so the newcomer waits
// for two jobs at most: the thread that queues the newcomer's job tells the worker so itself (a
// Yield frame), and the executor's Withdraw follows. A job whose worker crashes under it fails; the
// jobs behind it run on a fresh worker. One thread (Loop) owns the workers; it waits on the
// worker's socket and on an eventfd that Submit and Cancel ring.
//
// The quick path (WorkerOptions::busy_poll): a job that finds the loop asleep, nothing queued
// or running, and its client's worker the last one served goes to that worker from Submit's own
// thread, which then polls for the answer for up to the busy poll and delivers it itself — a
// unary call is then answered as a health check is, by the thread that took it, with no
// wake-up of the loop on the way there or back. A job that takes longer, or whose worker fails,
// is handed to the loop, which adopts it as if it had handed it on. While a job is on the quick
// path the loop does not touch the workers: it waits for the hand-over once awake.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/front/scheduling/client_turns.h"
#include "server/front/scheduling/job_runner.h"
#include "server/front/scheduling/metrics_sink.h"
#include "server/front/scheduling/pipeline_plan.h"
#include "server/front/workers/worker_process.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {

struct JobTiming {
  absl::Duration queue_wait;
  absl::Duration execution;
  uint64_t sequence = 0;  // its place among the jobs the device ran; 0: it reached no worker
};

// The worker processes of one device.
struct WorkerPool {
  int max_workers = 4;                             // one per client
  absl::Duration idle_timeout = absl::Minutes(5);  // a worker without a job this long ends
  int pipeline_depth = 8;                          // jobs handed to a worker at once
};

class DeviceExecutor {
 public:
  // What sets a client's reference runs and its lease's jobs apart from its own queue: no label
  // or subject holds the NUL byte that begins them, so none can spell another's.
  static constexpr char kReferenceSuffix[] = "\0reference";
  static constexpr char kLeaseSuffix[] = "\0lease";
  // The result of a job (a worker response whose code may be an error, or a failure of the
  // worker itself) and how long it waited and ran. Called on the executor's thread, or, for a
  // job answered on the quick path, on the thread that called Submit, before Submit returns; for
  // a queued job a lease gate refuses, on the thread that called SetLease (as Cancel's caller's).
  using Done = std::function<void(absl::StatusOr<kprof::worker::v1::WorkerAnswer>, JobTiming)>;

  // `runners` starts a client's runner; by default a kprofd-worker process as `worker` says.
  DeviceExecutor(WorkerOptions worker, int max_queue, absl::Duration job_timeout,
                 WorkerPool pool = WorkerPool(), RunnerFactory runners = nullptr);
  ~DeviceExecutor();  // Drain()

  // Queues a job that must finish by `deadline` (its execution is also capped by the job
  // timeout). `keep_alive` is held until `done` has run (pinned modules, say). `started`, when
  // set, runs on the executor's thread as the job leaves the queue for the worker (and keeps the
  // job off the quick path, whose `done` runs on the caller's thread). `beyond_bound` queues the
  // job even when the queue is full: for callers that bound their own jobs in the queue (a batch
  // stream holds a few).
  // Job ids (`request.job_id()`) are unique and grow with submission: a job taken back from the
  // worker goes before its client's later ones. RESOURCE_EXHAUSTED when the queue is full;
  // UNAVAILABLE once draining; INTERNAL for an id already queued or running.
  // `module_fds`, the request's modules opened for the worker, stay open as long as
  // `keep_alive` (which owns them) lives.
  absl::Status Submit(kprof::worker::v1::WorkerRequest request, std::string client,
                      absl::Time deadline, Done done, std::shared_ptr<void> keep_alive,
                      std::function<void()> started = nullptr, bool beyond_bound = false,
                      std::vector<int> module_fds = {}, std::string lease_id = "")
      ABSL_LOCKS_EXCLUDED(mutex_);

  // Takes job `job_id` out of the queue (its Done gets CANCELLED), or stops it if it runs (its
  // worker is killed and its result dropped; Done gets CANCELLED; the jobs handed on behind it
  // run on a fresh worker). A job handed on but not started is taken back. No-op for unknown
  // jobs.
  void Cancel(uint64_t job_id) ABSL_LOCKS_EXCLUDED(mutex_);

  // Refuses new jobs, answers queued ones UNAVAILABLE, lets the running one finish for up to
  // `grace` (then kills it), stops the worker. Idempotent.
  void Drain(absl::Duration grace = absl::Seconds(10)) ABSL_LOCKS_EXCLUDED(mutex_);

  // From a Done or `started` callback (the executor's thread) only: runs `fn` on that thread
  // once the answers that have arrived together are handled, before it waits again. A caller
  // that writes each answer out can write them together.
  void Defer(std::function<void()> fn);
  bool OnItsThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  struct Stats {
    int queue_length = 0;  // waiting, handed on to the worker but not started included
    bool busy = false;
    int64_t completed = 0;
    int64_t failed = 0;
    int workers = 0;  // running now, one per client
    int64_t workers_started = 0;
    int64_t quick_jobs = 0;      // answered on the quick path
    std::string running_client;  // whose job runs ("" when none)
    absl::Duration running_for;  // how long that client's jobs have held the device
    // Each client with jobs waiting (handed on to its worker but not started included), in the
    // order they joined the queue.
    std::vector<std::pair<std::string, int>> queued;
  };
  Stats stats() ABSL_LOCKS_EXCLUDED(mutex_);

  const base::Device& device() const { return worker_options_.device; }

  // Reports jobs and worker starts to `metrics` (not owned; it outlives the executor). Set
  // before the first Submit.
  void set_metrics(MetricsSink* metrics) { metrics_ = metrics; }

  // A lease's hold on the device (LeaseManager). While the gate is `open`, only jobs submitted
  // with its `lease_id` run (by `holder`, queued under LeaseKey(holder)); while it is not (the
  // lease's clocks being set or put back), no job does. Other jobs wait; one whose deadline falls
  // before `ends` is answered DEADLINE_EXCEEDED at once, beginning with `what` ("cuda:0 is leased
  // to alice until 2026-12-03T10:42:05Z"). While it is `ending`, the lease's queued jobs are
  // answered FAILED_PRECONDITION: they never run without it.
  struct LeaseGate {
    std::string holder;
    std::string lease_id;
    bool open = false;
    bool ending = false;
    absl::Time ends = absl::InfiniteFuture();
    std::string what;
  };
  // Whom a lease's jobs are queued (and run) as: `client`'s, in a worker of their own.
  static std::string LeaseKey(const std::string& client) {
    return client + std::string(kLeaseSuffix, sizeof kLeaseSuffix - 1);
  }
  // The key of a client's reference runs (answer checks): a worker apart from the client's own,
  // so that a reference's outputs never enter the candidate's process. No label holds the NUL
  // byte that sets it apart. KeyName is a key as logs and GetInfo show it ("alice (reference)",
  // "alice (lease)"), OwnerOf the client whose jobs they are (metrics count them as its own).
  static std::string ReferenceKey(const std::string& client) {
    return client + std::string(kReferenceSuffix, sizeof kReferenceSuffix - 1);
  }
  static std::string KeyName(const std::string& key);
  static std::string OwnerOf(const std::string& key);
  void SetLease(std::optional<LeaseGate> gate, std::function<void()> clear = nullptr)
      ABSL_LOCKS_EXCLUDED(mutex_);

  // Each client's weight in its share of the device (ClientTurns; by default 1 each). Before
  // the first Submit.
  void SetClientWeights(std::function<int(const std::string&)> weight_of)
      ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  struct Job {
    kprof::worker::v1::WorkerRequest request;
    std::string client;
    absl::Time deadline;
    absl::Time enqueued;
    Done done;
    std::shared_ptr<void> keep_alive;
    std::function<void()> started;
    std::vector<int> module_fds;  // owned by keep_alive
    bool interactive = true;      // queues ahead of batch jobs
    // With the worker (Loop's): answered already (cancelled while handed on; its answer, when it
    // comes, is dropped), or being taken back for another client's turn.
    bool cancelled = false;
    bool taking_back = false;
    bool beyond_bound = false;  // not counted against max_queue (Submit)
    std::string lease_id;       // the lease it runs under (queued as LeaseKey(client))
  };

  struct Worker {
    std::unique_ptr<JobRunner> process;
    absl::Time last_job;
  };

  // A job of the quick path that the loop is to take on: sent at `sent_at` (none: the send
  // failed) and, when it came, the answer read for it.
  struct Handover {
    Job job;
    std::optional<absl::Time> sent_at;
    std::optional<absl::StatusOr<kprof::worker::v1::WorkerAnswer>> answer;
  };

  // `job`'s frame for `worker`: its deadline set, its modules' descriptors withheld when the
  // worker has them open already.
  static FrameChannel::Outgoing Frame(Job& job, const JobRunner& worker);
  // Whether `client`'s job may take the quick path now.
  bool QuickPathOpen(const std::string& client) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Runs `job` on `worker` from the caller's thread (QuickPathOpen said so, and it is marked
  // quick_busy_): answers it, or hands it to the loop.
  void RunQuick(Job job, Worker* worker) ABSL_LOCKS_EXCLUDED(mutex_);
  // The loop, awake: takes on what the quick path handed over.
  void Adopt(Handover handover);
  // Tells the worker of the client served last to stop its busy poll, when it may still be in
  // it and another client's worker is about to run a job.
  void ParkLastServed(const std::string& next_client);

  // The executor's thread: hands jobs on, reads answers, stops what overruns, until drained.
  void Loop();
  // The loop's steps. Runs what answers deferred (Defer), if any: whether there was any.
  bool RunDeferred();
  // When the loop must wake by itself: the front job's limit, a handed-on job's deadline, or
  // (idle) the next check for idle workers.
  absl::Time WakeAt(absl::Time idle_check, absl::Time now) const;
  // Whether nothing came meanwhile that the loop must do first; if so, it is marked asleep
  // (and the quick path opened where the last client's worker polls).
  bool ReadyToSleep() ABSL_LOCKS_EXCLUDED(mutex_);
  // Sleeps until `until`, an answer, or a wake-up; what woke it (a quick path's handover is
  // taken on here).
  enum class Woken { kHandedOver, kAnswer, kOther };
  Woken Sleep(absl::Time until, absl::Time now) ABSL_LOCKS_EXCLUDED(mutex_);
  // Stops the front job when it ran past its limit without answering (DEADLINE_EXCEEDED).
  void StopOverdueFront(absl::Time after);
  // Hands jobs to the active worker (choosing the next client when it has none), or takes
  // jobs back when another client waits: the steps NextPipelineStep gives, until it says wait.
  void Refill();
  // What NextPipelineStep sees now.
  PipelineView View() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sends `jobs` (one client's) to the active worker, starting it when there is none; jobs it
  // cannot take are answered or queued again.
  void Hand(std::vector<Job> jobs);
  void HandOn(std::vector<Job> jobs);  // Hand's, less the accounting
  // An answer (or the failure to get one) from the active worker.
  void Answer(absl::StatusOr<kprof::worker::v1::WorkerAnswer> answer);
  // The active worker is gone or stopped: the job at the front of the pipeline gets `front`
  // (null: it is answered already), the ones behind it are queued again.
  // `cause` is why its replacement will start: "crash", "timeout", "recycle", "cancel".
  void LoseWorker(const absl::Status* front, std::string_view cause);
  void HandleCancels(std::vector<uint64_t> ids);
  // Takes back the jobs handed on and not started whose deadline has passed (answered
  // DEADLINE_EXCEEDED at once).
  void ExpireHandedOn(absl::Time now);
  void Withdraw(const std::vector<uint64_t>& ids);
  // Marks the jobs handed on from position `first` on as being taken back; their ids.
  std::vector<uint64_t> MarkTakenBack(size_t first);
  // When the front job's time is up: its deadline or the job timeout from when it began.
  absl::Time FrontLimit() const;
  // Publishes the pipeline's figures for stats() and Submit's bound.
  void Account();
  void Deliver(Job& job, absl::StatusOr<kprof::worker::v1::WorkerAnswer> result, absl::Time started,
               absl::Time ended);
  // Back in its client's queue, in order (or refused when draining).
  void Requeue(Job job) ABSL_LOCKS_EXCLUDED(mutex_);
  // Starts the front job's clock, and says so to whoever waits for it.
  void FrontStarted(absl::Time at);
  // The worker of `client`, started if need be (stopping the one idle longest at the bound).
  absl::StatusOr<JobRunner*> WorkerFor(const std::string& client);
  void RetireIdleWorkers();
  void EndWorker(const std::string& client);
  void Wake();
  // The next job, clients in turn; `after` (the client just served) goes last when others wait.
  // There must be one.
  Job TakeNext(const std::string& after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether the lease gate lets the jobs queued as `client` run now (no gate: everyone's; under
  // a lease, the holder's leased jobs and its reference runs).
  bool Admitted(const std::string& client) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Why a job of `client` (its queue key) carrying `lease_id` ("" for none), due by `deadline`,
  // cannot wait under the gate: its lease is not the one held (FAILED_PRECONDITION), or the
  // lease would keep it waiting past its deadline (DEADLINE_EXCEEDED). OK when it may wait (or
  // run): the holder's reference runs (the checks of its leased jobs) run under the lease.
  absl::Status LeaseRefusal(const std::string& client, const std::string& lease_id,
                            absl::Time deadline) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Runs the gate's `clear` once the device is clear of the jobs it keeps out.
  void CheckLeaseClear() ABSL_LOCKS_EXCLUDED(mutex_);
  // Takes a queued job out; its Done, or null when it is not queued.
  Done TakeFromQueue(uint64_t job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const WorkerOptions worker_options_;
  const int max_queue_;
  const absl::Duration job_timeout_;
  const WorkerPool pool_;
  const RunnerFactory runners_;
  int wake_fd_ = -1;  // an eventfd: new work or a cancel for the loop

  // The loop's own.
  std::map<std::string, Worker> workers_;  // by client
  // Why a client's next worker starts, when its last one was lost (the loop's).
  std::map<std::string, std::string> restart_cause_;
  MetricsSink* metrics_ = nullptr;
  std::string active_client_;                      // whose worker has the pipeline
  JobRunner* active_ = nullptr;                    // its worker; null when the pipeline is empty
  bool active_broken_ = false;                     // it closed its end: no more jobs to it
  std::deque<Job> in_flight_;                      // handed to active_, in order
  absl::Time front_since_;                         // when in_flight_.front() began to run
  std::vector<std::function<void()>> deferred_;    // Defer's
  absl::Time last_answer_ = absl::InfinitePast();  // the last served worker's last answer

  absl::Mutex mutex_;
  ClientTurns turns_ ABSL_GUARDED_BY(mutex_);                    // who is served next
  std::map<uint64_t, Job> queued_jobs_ ABSL_GUARDED_BY(mutex_);  // by job id
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mutex_);        // of jobs with the worker
  int handed_on_ ABSL_GUARDED_BY(mutex_) = 0;               // in_flight_'s jobs not answered yet
  int handed_waiting_bounded_ ABSL_GUARDED_BY(mutex_) = 0;  // behind the front, within bound
  std::string handed_client_ ABSL_GUARDED_BY(mutex_);       // whose they are
  // Since when handed_client_'s jobs have held the device without a pause.
  absl::Time handed_since_ ABSL_GUARDED_BY(mutex_);
  std::set<uint64_t> in_flight_ids_ ABSL_GUARDED_BY(mutex_);
  int workers_running_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t workers_started_ ABSL_GUARDED_BY(mutex_) = 0;
  bool draining_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;  // the loop has ended
  bool sleeping_ ABSL_GUARDED_BY(mutex_) = false;  // the loop waits: Wake it
  pid_t running_pid_ ABSL_GUARDED_BY(mutex_) = -1;
  // The worker that holds the pipeline (Account publishes it, cleared before it can go), which
  // Submit asks to yield when another client's job comes.
  JobRunner* yield_to_ ABSL_GUARDED_BY(mutex_) = nullptr;
  // The quick path: the worker it may use (published by the loop as it goes to sleep with
  // nothing to do, withdrawn as it wakes), whether a job is on it, and what it handed back.
  Worker* quick_worker_ ABSL_GUARDED_BY(mutex_) = nullptr;
  std::string quick_client_ ABSL_GUARDED_BY(mutex_);
  bool quick_busy_ ABSL_GUARDED_BY(mutex_) = false;
  std::optional<Handover> handover_ ABSL_GUARDED_BY(mutex_);
  std::optional<LeaseGate> lease_ ABSL_GUARDED_BY(mutex_);
  std::function<void()> lease_clear_ ABSL_GUARDED_BY(mutex_);
  int64_t quick_jobs_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t completed_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t ran_ ABSL_GUARDED_BY(mutex_) = 0;  // jobs a worker answered: JobTiming::sequence
  int64_t failed_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread thread_;
};

}  // namespace kprof::server

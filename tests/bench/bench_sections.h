// The sections of kprof_bench, each adding its rows to the table (bench_support.h). `target` is
// the daemon's address, `base` the bytes of vector_add.so that candidates are made from, and
// `health_p50` the p50 seconds of a health Check on the same daemon.
#pragma once

#include <string>

#include "client/kprof_client.h"
#include "daemon.h"

namespace kprof::bench {

// 1: builtin kernels timed through kprofd against Google Benchmark in-process.
void Accuracy(kprof::client::Client& client);

// 1b: matmul over a sweep of its tensors' placements, and the median of randomized layouts.
void PlacementSweep(kprof::client::Client& client);

// 2: a minimal TimeEvaluate against a bare health Check on the same daemon, p50 and p99.
void Overhead(const std::string& target, const std::string& label);
// ... the same from Python (grpcio), and through the Python client's time_evaluate().
void PythonOverhead(const std::string& target);

// 3: an autotuner's cost per candidate (upload 50 KB, TimeEvaluate) against a health Check.
void PerCandidate(kprof::client::Client& client, const std::string& base, double health_p50);

// 4: small jobs per second from 8 clients against health checks per second.
void Throughput(const std::string& target);

// 4b: the cost per job of batches, short and long, against a health Check and a ping-pong.
void Batches(const std::string& target, kprof::client::Client& client, const std::string& base,
             const std::string& faults);

// Wall seconds per nop job (number 1, repeat 1): of one MeasureBatch stream of the C++ client,
// of `kprof batch` with its lines written to a file (its start and connection left out), of the
// Python farm (likewise).
double BatchSecondsPerJob(kprof::client::Client& client, const std::string& module,
                          const std::string& function, int count);
double CliBatchSecondsPerJob(const std::string& target, int count);
double PythonFarmSecondsPerJob(const std::string& target, int count);

// 4c: against TVM's RPC (the anchor in ../shared/anchors, run in the same run when it is there):
// per job, per distinct candidate, and the device's share of a batch of one-millisecond
// candidates, through `kprof batch` and the Python farm.
void AgainstTvm(const std::string& target, kprof::client::Client& client);

// `count` distinct candidates (the bytes of test module `module`, each with a tag of its own,
// 50 KB at least) as files in `dir`, and a job file timing `function`(`args`) of each `repeat`
// times (number 1); VaddCandidates: vector_add's vadd on 256 floats, timed once.
std::string CandidateJobs(const std::string& dir, const std::string& module,
                          const std::string& function, const std::string& args, int repeat,
                          int count);
std::string VaddCandidates(const std::string& dir, int count);

// What a batch of candidates took: its wall seconds, the timed seconds of its calls, and the
// seconds the worker spent on its jobs (their execution: the calls timed and the first one
// discarded, the module's load, the arguments).
struct BatchTimes {
  double wall = 0, timed = 0, execution = 0;
};
// `kprof batch` over a job file of `count` jobs, as its result lines tell; the Python farm over
// the same file, from its first job to its last result. Each fails unless all are OK.
BatchTimes CliBatch(const std::string& target, const std::string& jobs, int count);
BatchTimes PythonBatch(const std::string& target, const std::string& jobs, int count);

// 4d: the CPU and the wake-ups of the client, the daemon and its workers per job, per candidate
// and per unary call, on the paths users run.
void Breakdown(const kprof::testing::Daemon& daemon, kprof::client::Client& client);

// --only batch-cpu: the CPU each process spends per job of a batch, round after round.
void BatchCpu(kprof::testing::Daemon& daemon, kprof::client::Client& client,
              const std::string& base);

// --only unary-cpu: the CPU each process spends per unary call; `kind` "time" or "health" alone.
void UnaryCpu(kprof::testing::Daemon& daemon, const std::string& kind);

// 5: a 64 MiB upload against a raw stream of the same bytes, and a second one against hashing.
void Upload(const std::string& target, kprof::client::Client& client, const std::string& base);

// 6: start time, memory and installed size of the daemon against programs that do nothing.
void Footprint(const std::string& base);

// What the sandbox costs: switching clients' workers, starting one, Landlock and seccomp.
void Isolation();

// 7: an empty function's time per call against one clock_gettime.
void TimerFloor(kprof::client::Client& client);

// 8: what checking answers costs: an honest kernel's median and a candidate batch, with a
// reference against without.
void Checks(const std::string& target, kprof::client::Client& client, const std::string& base);
// ... and strict checks: an honest kernel's median, and a strict batch of 200 one-millisecond
// candidates against the same batch unchecked.
void StrictChecks(const std::string& target, kprof::client::Client& client);

// 9: a 200 us spin's median under a flood of /metrics scrapes against the same daemon unscraped.
void ScrapeFlood();

}  // namespace kprof::bench

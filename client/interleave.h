// Interleaved batches: every candidate's repeats run as jobs of one repeat each, in a random
// order across candidates (drawn from a seed), so that a slow spell of the machine falls on all
// of them rather than on one — Google Benchmark's --benchmark_enable_random_interleaving, which
// cut run-to-run variance by about 40% (google/benchmark#1051), across daemons' jobs. The
// repeats of each candidate come back merged into one result, as if it had run them itself, with
// each repeat's place in the run order.
//
//   KPROF_RETURN_IF_ERROR(MeasureInterleaved(*farm, jobs, /*seed=*/7, on_update));
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/farm.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::client {

// The run order of `repeats[j]` repeats of each job j: every (job, repeat) pair once, in a
// random permutation drawn from `seed` alone (the same seed, the same order, on every host);
// each job's repeats in their own order.
std::vector<std::pair<size_t, int64_t>> InterleaveOrder(const std::vector<int64_t>& repeats,
                                                        uint64_t seed);
// The same order as the job of each place alone (4 bytes a repeat): a job's repeats come in
// their own order, so the one at a place is the count of that job's places before it.
std::vector<uint32_t> InterleaveSlots(const std::vector<int64_t>& repeats, uint64_t seed);

// Adds `part`'s repeats to `merged` (which becomes `part` when `first`), taking the statistics,
// the relative spread and the timing of them all; per-part outlier filtering is dropped.
void MergeRepeats(kprof::v1::TimeEvaluateResponse* merged,
                  const kprof::v1::TimeEvaluateResponse& part, bool first);

// Runs `jobs` (TimeEvaluate jobs with a fixed `repeat`, default 1) interleaved on `farm`, which
// must name one daemon: a candidate's repeats compared on different machines would measure the
// machines. `on_update` sees, per job, its first RUNNING and one DONE (the merged result, its
// `run_order` set; with discard_throttled, the throttled repeats left out and counted) or FAILED
// (the first part that failed). INVALID_ARGUMENT, before anything runs, for a farm of several
// daemons, a profile job or convergence (max_relative_stddev). With randomize_layout each part
// takes the layout its repeat has in the job (first_layout_repeat), and the merged result the
// job's layouts.
absl::Status MeasureInterleaved(Farm& farm, const std::vector<kprof::v1::BatchJob>& jobs,
                                uint64_t seed,
                                const std::function<void(const kprof::v1::BatchUpdate&)>& on_update,
                                const std::function<void()>& on_pause = nullptr);

}  // namespace kprof::client

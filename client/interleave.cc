#include "client/interleave.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "report/compare.h"
#include "report/statistics.h"

namespace kprof::client {

std::vector<uint32_t> InterleaveSlots(const std::vector<int64_t>& repeats, uint64_t seed) {
  std::vector<uint32_t> slots;  // one per repeat, naming its job
  for (size_t j = 0; j < repeats.size(); ++j) {
    slots.insert(slots.end(), static_cast<size_t>(repeats[j]), static_cast<uint32_t>(j));
  }
  // Fisher–Yates from the top, drawing from the seed's SplitMix64 stream.
  report::SplitMix64 random(seed);
  for (size_t i = slots.size(); i > 1; --i) std::swap(slots[i - 1], slots[random.Below(i)]);
  return slots;
}

std::vector<std::pair<size_t, int64_t>> InterleaveOrder(const std::vector<int64_t>& repeats,
                                                        uint64_t seed) {
  std::vector<std::pair<size_t, int64_t>> order;
  std::vector<int64_t> next(repeats.size(), 0);
  for (const uint32_t j : InterleaveSlots(repeats, seed)) order.emplace_back(j, next[j]++);
  return order;
}

void MergeRepeats(kprof::v1::TimeEvaluateResponse* merged,
                  const kprof::v1::TimeEvaluateResponse& part, bool first) {
  if (first) {
    *merged = part;
  } else {
    const int offset = merged->seconds_per_call_size();
    merged->mutable_seconds_per_call()->MergeFrom(part.seconds_per_call());
    merged->mutable_numbers()->MergeFrom(part.numbers());
    merged->mutable_warnings()->MergeFrom(part.warnings());
    for (int32_t i : part.throttled_repeats()) merged->add_throttled_repeats(offset + i);
    merged->set_discarded_throttled(merged->discarded_throttled() + part.discarded_throttled());
    for (const kprof::v1::ClockReason& reason : part.clock_reasons()) {
      kprof::v1::ClockReason* into = nullptr;
      for (kprof::v1::ClockReason& known : *merged->mutable_clock_reasons()) {
        if (known.reason() == reason.reason()) into = &known;
      }
      if (into == nullptr) {
        into = merged->add_clock_reasons();
        into->set_reason(reason.reason());
      }
      for (int32_t i : reason.repeats()) into->add_repeats(offset + i);
    }
    for (const kprof::v1::Layout& layout : part.layouts()) {
      const int begins = offset + layout.first_repeat();
      const int n = merged->layouts_size();
      kprof::v1::Layout* last = n > 0 ? merged->mutable_layouts(n - 1) : nullptr;
      if (last != nullptr && last->first_repeat() + last->repeats() == begins &&
          last->index() == layout.index()) {
        // The part went on with the layout the one before ended in: one layout, its repeats
        // together.
        last->set_repeats(last->repeats() + layout.repeats());
        const auto begin = merged->seconds_per_call().begin() + last->first_repeat();
        last->set_median(report::Median(std::vector<double>(begin, begin + last->repeats())));
        continue;
      }
      kprof::v1::Layout* added = merged->add_layouts();
      *added = layout;
      added->set_first_repeat(begins);
    }
    merged->set_final_number(part.final_number());
    auto* timing = merged->mutable_timing();
    timing->set_queue_wait_seconds(timing->queue_wait_seconds() +
                                   part.timing().queue_wait_seconds());
    timing->set_execution_seconds(timing->execution_seconds() + part.timing().execution_seconds());
  }
  const std::vector<double> all(merged->seconds_per_call().begin(),
                                merged->seconds_per_call().end());
  const report::Summary summary = report::Summarize(all);
  auto* s = merged->mutable_statistics();
  s->set_mean(summary.mean);
  s->set_median(summary.median);
  s->set_min(summary.min);
  s->set_max(summary.max);
  s->set_std(summary.stddev);
  s->set_cv(summary.cv);
  merged->set_rel_stddev(summary.cv);
  merged->clear_filtered_statistics();  // of a part, not of the whole
  merged->clear_outliers();
}

namespace {

// Parts are made and sent this many at a time: a run of 100 jobs x 100 000 repeats holds 4 bytes
// a repeat and one chunk of jobs, not ten million of them.
constexpr size_t kChunk = 4096;

// The repeats of each job, checked: INVALID_ARGUMENT naming the job that cannot be interleaved.
absl::StatusOr<std::vector<int64_t>> RepeatsOf(const std::vector<kprof::v1::BatchJob>& jobs) {
  std::vector<int64_t> repeats;
  for (const kprof::v1::BatchJob& job : jobs) {
    if (!job.has_time_evaluate()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job '", job.id(), "': interleaving applies to TimeEvaluate jobs"));
    }
    const kprof::v1::TimeEvaluateRequest& r = job.time_evaluate();
    if (r.max_relative_stddev() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("job '", job.id(),
                       "': interleaving runs each repeat as a job of its own; give "
                       "\"repeat\", not \"max_relative_stddev\""));
    }
    const int64_t repeat = r.has_repeat() ? r.repeat() : 1;
    if (repeat < 1 || repeat > 100'000) {
      return absl::InvalidArgumentError(absl::StrCat("job '", job.id(), "': repeat = ", repeat,
                                                     " is out of range (accepted: 1 to 100000)"));
    }
    repeats.push_back(repeat);
  }
  return repeats;
}

// One interleaved run: its parts made chunk by chunk, and their updates merged per job.
class Interleaving {
 public:
  Interleaving(const std::vector<kprof::v1::BatchJob>& jobs, std::vector<int64_t> repeats,
               uint64_t seed, const std::function<void(const kprof::v1::BatchUpdate&)>& on_update)
      : jobs_(jobs),
        repeats_(std::move(repeats)),
        slots_(InterleaveSlots(repeats_, seed)),
        on_update_(on_update),
        merged_(jobs.size()),
        next_(jobs.size(), 0),
        done_(jobs.size(), 0),
        kept_(jobs.size(), 0),
        dropped_(jobs.size(), 0),
        running_(jobs.size(), false),
        failed_(jobs.size(), false) {}

  size_t size() const { return slots_.size(); }

  // The parts at places [begin, end), but those of jobs already failed: each a job of one
  // repeat, its id "i" and its place.
  std::vector<kprof::v1::BatchJob> Parts(size_t begin, size_t end) {
    std::vector<kprof::v1::BatchJob> parts;
    for (size_t position = begin; position < end; ++position) {
      const uint32_t j = slots_[position];
      const int64_t r = next_[j]++;
      if (failed_[j]) continue;
      kprof::v1::BatchJob& part = parts.emplace_back(jobs_[j]);
      part.set_id(absl::StrCat("i", position));  // unique whatever the jobs' own ids are
      kprof::v1::TimeEvaluateRequest* request = part.mutable_time_evaluate();
      request->set_repeat(1);
      if (request->randomize_layout()) {
        // The layout the job's repeat r would have had, not every part the first one.
        request->set_first_layout_repeat(jobs_[j].time_evaluate().first_layout_repeat() + r);
      }
      // A part of one repeat cannot drop it: the merge drops the throttled ones instead.
      request->set_discard_throttled(false);
    }
    return parts;
  }

  // A part's update, as its job's: its first RUNNING, its first failure, or its merged result
  // once the last of its parts is done.
  void Update(const kprof::v1::BatchUpdate& update) {
    size_t position = 0;
    if (update.id().size() < 2 || !absl::SimpleAtoi(update.id().substr(1), &position) ||
        position >= slots_.size()) {
      return;
    }
    const size_t j = slots_[position];
    if (failed_[j]) return;
    kprof::v1::BatchUpdate out;
    out.set_id(jobs_[j].id());
    out.set_state(update.state());
    if (update.state() == kprof::v1::BatchUpdate::RUNNING) {
      if (running_[j]) return;
      running_[j] = true;
    } else if (update.state() == kprof::v1::BatchUpdate::FAILED) {
      failed_[j] = true;
      out = update;
      out.set_id(jobs_[j].id());
      out.clear_more();
      out.set_message(
          absl::StrCat("repeat ", done_[j] + 1, " of ", repeats_[j], ": ", update.message()));
    } else if (update.state() == kprof::v1::BatchUpdate::DONE) {
      if (!Merge(j, update.time_evaluate(), static_cast<int32_t>(position), out)) return;
    } else {
      return;  // QUEUED of a part
    }
    on_update_(out);
  }

 private:
  // Takes a part's result into job j's; true when it was the last, `out` then the job's.
  bool Merge(size_t j, const kprof::v1::TimeEvaluateResponse& part, int32_t position,
             kprof::v1::BatchUpdate& out) {
    if (jobs_[j].time_evaluate().discard_throttled() && part.throttled_repeats_size() > 0) {
      ++dropped_[j];
    } else {
      MergeRepeats(&merged_[j], part, kept_[j] == 0);
      merged_[j].add_run_order(position);
      ++kept_[j];
    }
    if (++done_[j] < repeats_[j]) return false;
    if (kept_[j] == 0) {
      out.set_state(kprof::v1::BatchUpdate::FAILED);
      out.set_code(static_cast<int32_t>(absl::StatusCode::kFailedPrecondition));
      out.set_message(absl::StrCat("all ", repeats_[j],
                                   " repeats were throttled, so discard_throttled leaves none: "
                                   "cool the host, or lower throttle_threshold"));
    } else {
      if (dropped_[j] > 0) merged_[j].set_discarded_throttled(dropped_[j]);
      *out.mutable_time_evaluate() = std::move(merged_[j]);
      merged_[j].Clear();
    }
    return true;
  }

  const std::vector<kprof::v1::BatchJob>& jobs_;
  const std::vector<int64_t> repeats_;
  const std::vector<uint32_t> slots_;  // the job at each place of the run order
  const std::function<void(const kprof::v1::BatchUpdate&)>& on_update_;
  std::vector<kprof::v1::TimeEvaluateResponse> merged_;
  std::vector<int64_t> next_, done_, kept_, dropped_;  // next_: the next part's repeat
  std::vector<bool> running_, failed_;
};

}  // namespace

absl::Status MeasureInterleaved(Farm& farm, const std::vector<kprof::v1::BatchJob>& jobs,
                                uint64_t seed,
                                const std::function<void(const kprof::v1::BatchUpdate&)>& on_update,
                                const std::function<void()>& on_pause) {
  if (farm.daemons().size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("interleaving compares candidates on one machine, and the target names ",
                     farm.daemons().size(),
                     " daemons: give one (a candidate's repeats on several machines "
                     "would measure the machines)"));
  }
  absl::StatusOr<std::vector<int64_t>> repeats = RepeatsOf(jobs);
  if (!repeats.ok()) return repeats.status();
  Interleaving run(jobs, *std::move(repeats), seed, on_update);
  for (size_t begin = 0; begin < run.size(); begin += kChunk) {
    const std::vector<kprof::v1::BatchJob> parts =
        run.Parts(begin, std::min(run.size(), begin + kChunk));
    if (parts.empty()) continue;
    if (const absl::Status stream = farm.MeasureBatch(
            parts, [&run](const kprof::v1::BatchUpdate& update) { run.Update(update); },
            /*window=*/32, on_pause);
        !stream.ok()) {
      return stream;
    }
  }
  return absl::OkStatus();
}

}  // namespace kprof::client

#include "client/interleave.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "report/compare.h"
#include "report/statistics.h"

namespace kprof::client {

std::vector<std::pair<size_t, int64_t>> InterleaveOrder(const std::vector<int64_t>& repeats,
                                                        uint64_t seed) {
  std::vector<size_t> slots;  // one per repeat, naming its job
  for (size_t j = 0; j < repeats.size(); ++j) {
    for (int64_t r = 0; r < repeats[j]; ++r) slots.push_back(j);
  }
  // Fisher–Yates from the top, drawing from the seed's SplitMix64 stream.
  report::SplitMix64 random(seed);
  for (size_t i = slots.size(); i > 1; --i) std::swap(slots[i - 1], slots[random.Below(i)]);
  std::vector<std::pair<size_t, int64_t>> order;
  std::vector<int64_t> next(repeats.size(), 0);
  order.reserve(slots.size());
  for (size_t j : slots) order.emplace_back(j, next[j]++);
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
  const std::vector<std::pair<size_t, int64_t>> order = InterleaveOrder(repeats, seed);
  std::vector<kprof::v1::BatchJob> parts;
  std::map<std::string, size_t> job_of;  // part id to job index
  parts.reserve(order.size());
  for (size_t position = 0; position < order.size(); ++position) {
    const auto [j, r] = order[position];
    kprof::v1::BatchJob part = jobs[j];
    part.set_id(absl::StrCat("i", position));  // unique whatever the jobs' own ids are
    part.mutable_time_evaluate()->set_repeat(1);
    if (part.time_evaluate().randomize_layout()) {
      // The layout the job's repeat r would have had, not every part the first one.
      part.mutable_time_evaluate()->set_first_layout_repeat(
          jobs[j].time_evaluate().first_layout_repeat() + r);
    }
    // A part of one repeat cannot drop it: the merge drops the throttled ones instead.
    part.mutable_time_evaluate()->set_discard_throttled(false);
    job_of[part.id()] = j;
    parts.push_back(std::move(part));
  }
  std::vector<kprof::v1::TimeEvaluateResponse> merged(jobs.size());
  std::vector<int64_t> done(jobs.size(), 0), kept(jobs.size(), 0), dropped(jobs.size(), 0);
  std::vector<bool> running(jobs.size(), false), failed(jobs.size(), false);
  const absl::Status stream = farm.MeasureBatch(
      parts,
      [&](const kprof::v1::BatchUpdate& update) {
        const auto found = job_of.find(update.id());
        if (found == job_of.end()) return;
        const size_t j = found->second;
        if (failed[j]) return;
        kprof::v1::BatchUpdate out;
        out.set_id(jobs[j].id());
        out.set_state(update.state());
        if (update.state() == kprof::v1::BatchUpdate::RUNNING) {
          if (running[j]) return;
          running[j] = true;
        } else if (update.state() == kprof::v1::BatchUpdate::FAILED) {
          failed[j] = true;
          out = update;
          out.set_id(jobs[j].id());
          out.clear_more();
          out.set_message(
              absl::StrCat("repeat ", done[j] + 1, " of ", repeats[j], ": ", update.message()));
        } else if (update.state() == kprof::v1::BatchUpdate::DONE) {
          const kprof::v1::TimeEvaluateResponse& part = update.time_evaluate();
          if (jobs[j].time_evaluate().discard_throttled() && part.throttled_repeats_size() > 0) {
            ++dropped[j];
          } else {
            MergeRepeats(&merged[j], part, kept[j] == 0);
            merged[j].add_run_order(static_cast<int32_t>(std::stoll(update.id().substr(1))));
            ++kept[j];
          }
          if (++done[j] < repeats[j]) return;
          if (kept[j] == 0) {
            out.set_state(kprof::v1::BatchUpdate::FAILED);
            out.set_code(static_cast<int32_t>(absl::StatusCode::kFailedPrecondition));
            out.set_message(absl::StrCat("all ", repeats[j],
                                         " repeats were throttled, so "
                                         "discard_throttled leaves none: cool the host, or lower "
                                         "throttle_threshold"));
          } else {
            if (dropped[j] > 0) merged[j].set_discarded_throttled(dropped[j]);
            *out.mutable_time_evaluate() = merged[j];
          }
        } else {
          return;  // QUEUED of a part
        }
        on_update(out);
      },
      /*window=*/32, on_pause);
  return stream;
}

}  // namespace kprof::client

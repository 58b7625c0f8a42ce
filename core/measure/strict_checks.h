// StrictChecks: the checks of a strict job (AnswerCheck.level STRICT) among its timed repeats,
// made so that a function cannot tell a checked call from any other.
//
// The job's data come from a seed drawn from the kernel's random source when the job starts,
// never sent to the worker nor known to the client. A probe call before the timed repeats tells
// which arguments the function writes. Then, at repeats drawn one by one as the run goes (each
// draw made just before its repeat, so that no schedule lies in memory to be read), a repeat is
// checked: the arguments the function writes are poisoned first (NaN, or kPoisonByte), and at
// some checks every argument is first written afresh from a new secret seed, in the same buffers
// at the same addresses. The last repeat is always checked. After a checked call: the threads
// are counted at once (one the call started and left running fails the job), the written
// arguments are fingerprinted at return and again after the device is synchronised (a change
// in between fails it), and the arguments are handed to `send`, whose receiver judges them
// against a reference run on the same seed and poison. Calls on fresh inputs that are far
// slower than the others (and more to confirm it) are a finding that fails a job whose
// answers are right: the function's time depends on seeing its inputs again.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "core/args/arguments.h"

namespace kprof::core {

// The payload (absl::Status::SetPayload) that marks a failure of the checks themselves (a
// thread left running, outputs written after the return), not of the function's call.
inline constexpr char kStrictCheckFailed[] = "kprof.strict_check_failed";
// Whether `status` is such a failure.
inline bool StrictCheckFailed(const absl::Status& status) {
  return status.GetPayload(kStrictCheckFailed).has_value();
}

// One checked call of a strict job, as sent out with its arguments.
struct CheckedRepeat {
  // The timed repeat (from 0); `repeats` for a call after the last repeat of a run that
  // stopped before the repeats it planned.
  int64_t repeat = 0;
  int64_t repeats = 0;          // the repeats the run planned
  uint64_t seed = 0;            // the data's, before the poison
  bool fresh = false;           // every argument was written afresh (from `seed`) before the call
  std::vector<bool> written;    // the arguments the probe saw written (poisoned before the call)
  std::vector<bool> unchanged;  // the others that the call left as they were (not sent)
};

struct StrictOptions {
  int checks = 4;  // checked repeats, the last one included (fewer when there are fewer repeats)
  // How many of them get fresh inputs, the first check always: each costs the receiver a
  // reference run, and the checks after one judge its data (docs/CHECKING.md says why one is
  // enough).
  int fresh = 1;
  // The ids of the process's threads now, sorted (a worker leaves out the CUDA driver's own);
  // none: not looked at.
  std::function<std::vector<int>()> threads;
  // Takes a checked call's arguments, after the device was synchronised.
  std::function<absl::Status(const Arguments&, const CheckedRepeat&)> send;
  // Takes the run's Finding() at its end (when not "").
  std::function<void(const std::string&)> finding;
  // Calls on fresh inputs fail the job as remembered answers when each took more than
  // `fresh_slowdown` times the median of the unchecked calls.
  double fresh_slowdown = 3.0;
};

// How much slower than the unchecked calls every call on fresh inputs must be, beyond
// fresh_slowdown times, to be a finding.
inline constexpr double kFreshMargin = 2e-6;
// How many calls on fresh inputs must be that slow for the finding: a busy host slows a call or
// two now and then, not five.
inline constexpr int kSlowCalls = 5;

class StrictChecks {
 public:
  // `repeats`: the timed repeats the run plans; `device`: where the function runs.
  StrictChecks(const StrictOptions& options, int64_t repeats, base::Device device);

  // A seed for a job's data, from the kernel's random source.
  static uint64_t DrawSeed();

  // The probe: calls the function once on the data as initialised (from `seed`), untimed, and
  // notes which arguments it wrote.
  absl::Status Probe(uint64_t seed, Arguments& args, absl::FunctionRef<absl::Status()> call);
  // Before repeat `repeat`: draws whether it is checked and how, and prepares its data.
  absl::Status BeforeRepeat(int64_t repeat, Arguments& args);
  // After repeat `repeat` (one call, `seconds` long): a checked one's threads, fingerprints
  // and arguments.
  absl::Status AfterRepeat(int64_t repeat, double seconds, Arguments& args);
  // After the run, `done` repeats in all: when it stopped before the repeats it planned, one
  // more checked call; and when the calls on fresh inputs were far slower than the others, more
  // on fresh inputs to confirm it, five slow ones in all and at least three more (Finding).
  absl::Status Finish(int64_t done, Arguments& args, absl::FunctionRef<absl::Status()> call);
  // What the times say, or "": calls on fresh inputs far slower than the unchecked ones. The
  // receiver of the checked calls fails the job with it when the answers were right (a wrong
  // answer is the plainer finding).
  std::string Finding() const;

  // The arguments the probe saw written (poisoned before each checked call).
  const std::vector<bool>& written() const { return written_; }
  // Whether a check found work going on after a call returned: the function may still write
  // into its arguments, which must then outlive the job.
  bool work_outlived() const { return work_outlived_; }

 private:
  // "checked repeat 7 of 20" (1-based) or "the checked call after the last repeat".
  std::string Name(int64_t repeat) const;
  absl::Status Prepare(bool fresh, Arguments& args);
  absl::Status Judge(int64_t repeat, Arguments& args);
  // Whether every call of `fresh` took fresh_slowdown times the unchecked median, and more.
  bool Slower(const std::vector<double>& fresh) const;
  // When the calls on fresh inputs were slower: whether the calls that confirm it (kSlowCalls in
  // all, three at least), timed here, are too.
  absl::Status Confirm(Arguments& args, absl::FunctionRef<absl::Status()> call);
  // The threads now that were not there before the checked call.
  std::vector<int> NewThreads() const;
  enum class Which { kAll, kWritten, kOthers };
  // A fingerprint of each argument of `which` kind (0 for the others).
  absl::Status Fingerprints(const Arguments& args, Which which, std::vector<uint64_t>& out) const;

  const StrictOptions& options_;
  const int64_t repeats_;
  const base::Device device_;
  std::vector<bool> written_;
  uint64_t seed_ = 0;
  int checks_left_ = 0;
  int fresh_left_ = 0;
  int fresh_made_ = 0;
  bool checked_ = false;  // the current repeat
  bool fresh_ = false;
  std::vector<int> threads_before_;
  int confirmed_by_ = 0;  // the calls Confirm made
  bool work_outlived_ = false;
  bool suspected_ = false;               // Confirm's
  std::vector<uint64_t> others_before_;  // of the arguments not written, before a checked call
  std::vector<double> fresh_seconds_;
  std::vector<double> unchecked_seconds_;
};

}  // namespace kprof::core

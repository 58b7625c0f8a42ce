#include "core/measure/strict_checks.h"

#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/device/device_api.h"
#include "report/statistics.h"

namespace kprof::core {
namespace {

// A draw from the kernel's random source (std::random_device where getrandom is refused).
uint64_t Draw() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) == static_cast<ssize_t>(sizeof(value))) return value;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// ABORTED with `message`, marked as a failure of the checks (kStrictCheckFailed).
absl::Status Failed(std::string message) {
  absl::Status status = absl::AbortedError(std::move(message));
  status.SetPayload(kStrictCheckFailed, absl::Cord("1"));
  return status;
}

// True with probability `k` / `n` (0 < n).
bool Chance(int64_t k, int64_t n) {
  return static_cast<int64_t>(Draw() % static_cast<uint64_t>(n)) < k;
}

}  // namespace

StrictChecks::StrictChecks(const StrictOptions& options, int64_t repeats, base::Device device)
    : options_(options), repeats_(repeats), device_(device) {
  checks_left_ =
      static_cast<int>(std::clamp<int64_t>(options.checks, 1, std::max<int64_t>(repeats, 1)));
  // At least one check on fresh inputs, and one that keeps them when there are two checks or more.
  fresh_left_ = std::clamp(options.fresh, 1, std::max(checks_left_ - 1, 1));
}

uint64_t StrictChecks::DrawSeed() { return Draw(); }

std::string StrictChecks::Name(int64_t repeat) const {
  if (repeat >= repeats_) return "the checked call after the last repeat";
  return absl::StrCat("checked repeat ", repeat + 1, " of ", repeats_);
}

absl::Status StrictChecks::Fingerprints(const Arguments& args, Which which,
                                        std::vector<uint64_t>& out) const {
  out.assign(static_cast<size_t>(args.size()), 0);
  for (size_t k = 0; k < out.size(); ++k) {
    const bool written = k < written_.size() && written_[k];
    if (which == Which::kWritten ? !written : which == Which::kOthers && written) continue;
    KPROF_ASSIGN_OR_RETURN(out[k], args.Fingerprint(k));
  }
  return absl::OkStatus();
}

absl::Status StrictChecks::Probe(uint64_t seed, Arguments& args,
                                 absl::FunctionRef<absl::Status()> call) {
  seed_ = seed;
  written_.clear();
  std::vector<uint64_t> before, after;
  KPROF_RETURN_IF_ERROR(Fingerprints(args, Which::kAll, before));
  KPROF_RETURN_IF_ERROR(call());
  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(device_.type));
  KPROF_RETURN_IF_ERROR(api->Sync(device_));
  KPROF_RETURN_IF_ERROR(Fingerprints(args, Which::kAll, after));
  written_.resize(before.size());
  for (size_t k = 0; k < before.size(); ++k) {
    // A scalar is passed by value to kernels and is a size or a factor to host code: poisoning
    // it would change what the call does, not what it leaves.
    written_[k] = before[k] != after[k] && !args.specs()[k].shape.empty();
  }
  return absl::OkStatus();
}

absl::Status StrictChecks::Prepare(bool fresh, Arguments& args) {
  if (fresh) {
    fresh_left_ = std::max(fresh_left_ - 1, 0);
    ++fresh_made_;
    seed_ = Draw();
    KPROF_RETURN_IF_ERROR(args.Refill(seed_));
  }
  for (size_t k = 0; k < written_.size(); ++k) {
    if (written_[k]) KPROF_RETURN_IF_ERROR(args.Poison(k));
  }
  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(device_.type));
  KPROF_RETURN_IF_ERROR(api->Sync(device_));
  // What the function must leave as it is, to tell afterwards that it did (and not send it).
  KPROF_RETURN_IF_ERROR(Fingerprints(args, Which::kOthers, others_before_));
  if (options_.threads) threads_before_ = options_.threads();
  return absl::OkStatus();
}

absl::Status StrictChecks::BeforeRepeat(int64_t repeat, Arguments& args) {
  checked_ = false;
  if (repeat >= repeats_ || checks_left_ == 0) return absl::OkStatus();
  if (repeat == repeats_ - 1) {
    checked_ = true;  // always the last
  } else {
    // Exactly checks_left_ - 1 of the repeats before the last, each drawn as it comes.
    checked_ = Chance(checks_left_ - 1, repeats_ - 1 - repeat);
  }
  if (!checked_) return absl::OkStatus();
  // The first check writes fresh inputs: no check judges the job's first data, which then need
  // no reference run of their own.
  fresh_ = fresh_made_ == 0 || (fresh_left_ > 0 && Chance(fresh_left_, checks_left_));
  --checks_left_;
  return Prepare(fresh_, args);
}

absl::Status StrictChecks::Judge(int64_t repeat, Arguments& args) {
  const auto returned = std::chrono::steady_clock::now();
  // The outputs first: on a GPU, work the call left on a stream of its own may be done soon
  // after the return, and the copy back does not wait for it.
  std::vector<uint64_t> at_return, later, others;
  KPROF_RETURN_IF_ERROR(Fingerprints(args, Which::kWritten, at_return));
  const std::vector<int> new_threads = NewThreads();
  if (!new_threads.empty()) {
    // A thread that is only ending (joined, its exit not yet complete) is gone a moment later.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (const std::vector<int> still = NewThreads(); !still.empty()) {
      work_outlived_ = true;
      return Failed(absl::StrCat(
          Name(repeat), ": the call started ", still.size(),
          " thread(s) still running when it returned (and 1 ms later): work went on after "
          "the call"));
    }
  }
  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(device_.type));
  KPROF_RETURN_IF_ERROR(api->Sync(device_));  // the whole device: every stream's work
  // What the function must have left as it was, meanwhile; and the arguments sent out, while
  // the last check waits.
  KPROF_RETURN_IF_ERROR(Fingerprints(args, Which::kOthers, others));
  if (options_.send) {
    CheckedRepeat checked{repeat, repeats_, seed_, fresh_, written_, {}};
    checked.unchanged.resize(others.size());
    for (size_t k = 0; k < others.size(); ++k) {
      checked.unchanged[k] = !written_[k] && others[k] == others_before_[k];
    }
    KPROF_RETURN_IF_ERROR(options_.send(args, checked));
  }
  if (repeat >= repeats_ - 1) {
    // The last check waits a while (a quarter of a call's time, 0.1 to 5 ms, from the return):
    // work that a thread the function keeps goes on with after the return shows.
    const double median = unchecked_seconds_.empty() ? 0 : report::Median(unchecked_seconds_);
    std::this_thread::sleep_until(
        returned + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(std::clamp(median / 4, 1e-4, 5e-3))));
  }
  KPROF_RETURN_IF_ERROR(Fingerprints(args, Which::kWritten, later));
  for (size_t k = 0; k < later.size(); ++k) {
    if (later[k] == at_return[k]) continue;
    work_outlived_ = true;
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - returned)
            .count();
    return Failed(absl::StrFormat(
        "%s: argument %d changed after the call returned (its bytes at the return and %.2f ms "
        "later differ): work went on after the call",
        Name(repeat), k, ms));
  }
  return absl::OkStatus();
}

std::vector<int> StrictChecks::NewThreads() const {
  if (!options_.threads) return {};
  std::vector<int> now = options_.threads(), started;
  std::set_difference(now.begin(), now.end(), threads_before_.begin(), threads_before_.end(),
                      std::back_inserter(started));
  return started;
}

absl::Status StrictChecks::AfterRepeat(int64_t repeat, double seconds, Arguments& args) {
  if (!checked_) {
    unchecked_seconds_.push_back(seconds);
    return absl::OkStatus();
  }
  if (fresh_) fresh_seconds_.push_back(seconds);
  return Judge(repeat, args);
}

absl::Status StrictChecks::Finish(int64_t done, Arguments& args,
                                  absl::FunctionRef<absl::Status()> call) {
  if (done < repeats_) {
    // The run stopped before its planned repeats (converged, or out of time): one more checked
    // call, as if it were the next repeat (a fresh one if none was made).
    fresh_ = fresh_made_ == 0;
    checked_ = true;
    KPROF_RETURN_IF_ERROR(Prepare(fresh_, args));
    KPROF_RETURN_IF_ERROR(call());
    KPROF_RETURN_IF_ERROR(Judge(std::max(done, repeats_), args));
  }
  return Confirm(args, call);
}

bool StrictChecks::Slower(const std::vector<double>& fresh) const {
  if (fresh.empty() || unchecked_seconds_.size() < 2) return false;
  const double median = report::Median(unchecked_seconds_);
  const double fastest = *std::min_element(fresh.begin(), fresh.end());
  // A few microseconds apart is a cache's or a timer's doing, not a function's choice.
  return fastest > options_.fresh_slowdown * median && fastest - median >= kFreshMargin;
}

absl::Status StrictChecks::Confirm(Arguments& args, absl::FunctionRef<absl::Status()> call) {
  suspected_ = Slower(fresh_seconds_);
  if (!suspected_) return absl::OkStatus();
  // A slow call or two may be a busy host's doing: more on fresh inputs, untimed by the
  // evaluator and unchecked (their answers are not the point), must be as slow.
  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(device_.type));
  confirmed_by_ = std::max(3, kSlowCalls - static_cast<int>(fresh_seconds_.size()));
  std::vector<double> more;
  for (int i = 0; i < confirmed_by_; ++i) {
    KPROF_RETURN_IF_ERROR(args.Refill(Draw()));
    KPROF_RETURN_IF_ERROR(api->Sync(device_));
    const auto start = std::chrono::steady_clock::now();
    KPROF_RETURN_IF_ERROR(call());
    KPROF_RETURN_IF_ERROR(api->Sync(device_));
    more.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  suspected_ = Slower(more);
  return absl::OkStatus();
}

std::string StrictChecks::Finding() const {
  if (!suspected_) return "";
  const double median = report::Median(unchecked_seconds_);
  const double fastest = *std::min_element(fresh_seconds_.begin(), fresh_seconds_.end());
  return absl::StrFormat(
      "every call on fresh inputs took more than %.1fx the median of the unchecked calls (%zu "
      "calls, the fastest %.3g us, against %.3g us; %d more on fresh inputs as well): the "
      "function's time depends on seeing the same inputs again",
      options_.fresh_slowdown, fresh_seconds_.size(), fastest * 1e6, median * 1e6, confirmed_by_);
}

}  // namespace kprof::core

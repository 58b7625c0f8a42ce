// A Clock that moves only when told: tests advance it by hand, and sleeping advances it too.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "core/device/clock.h"

namespace kprof::testing {

class FakeClock final : public core::Clock {
 public:
  int64_t NowNanos() override { return now_nanos_; }
  void SleepFor(absl::Duration duration) override {
    sleeps_.push_back(duration);
    Advance(duration);
  }

  void Advance(absl::Duration duration) { now_nanos_ += absl::ToInt64Nanoseconds(duration); }
  const std::vector<absl::Duration>& sleeps() const { return sleeps_; }

 private:
  int64_t now_nanos_ = 1'000'000'000;
  std::vector<absl::Duration> sleeps_;
};

}  // namespace kprof::testing

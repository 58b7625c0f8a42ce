// The host clock that timers read and time evaluation sleeps on, behind an interface so that
// tests can drive time by hand.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace kprof::core {

class Clock {
 public:
  virtual ~Clock() = default;

  // Nanoseconds since an arbitrary, fixed origin; never goes backwards.
  virtual int64_t NowNanos() = 0;

  // Blocks the calling thread for `duration` (cool-downs between repeats).
  virtual void SleepFor(absl::Duration duration) = 0;

  // The process's monotonic clock (std::chrono::steady_clock). Never null, never freed.
  static Clock* Steady();
};

}  // namespace kprof::core

#include "core/device/clock.h"

#include <chrono>

#include "absl/time/clock.h"

namespace kprof::core {
namespace {

class SteadyClock final : public Clock {
 public:
  int64_t NowNanos() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepFor(absl::Duration duration) override { absl::SleepFor(duration); }
};

}  // namespace

Clock* Clock::Steady() {
  static SteadyClock* const clock = new SteadyClock();
  return clock;
}

}  // namespace kprof::core

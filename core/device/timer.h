// Timers: how long a region took on a device.
//
// A Timer is started and stopped around the measured region; ElapsedNanos may synchronise with
// the device (an event timer waits for its stop event), so it is read after Stop, once the
// measurement is over. Device types register a factory; a type without one falls back to a
// timer that synchronises the device around the host clock, and says so once.
//
//   KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Timer> timer, TimerRegistry::Global().Create(dev));
//   timer->Start();
//   Work();
//   timer->Stop();
//   const int64_t ns = timer->ElapsedNanos();
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/device.h"
#include "core/device/clock.h"

namespace kprof::core {

class DeviceApi;

class Timer {
 public:
  virtual ~Timer() = default;
  virtual void Start() = 0;
  virtual void Stop() = 0;
  // Nanoseconds between the last Start and Stop.
  virtual int64_t ElapsedNanos() = 0;
  // Whether the device accepted Start, Stop and the reading (a device timer's calls can fail:
  // a kernel fault poisons a CUDA context); ElapsedNanos is meaningless when not OK.
  virtual absl::Status status() const { return absl::OkStatus(); }
};

// Reads `clock` (the steady clock by default) at Start and Stop: right for code that runs on
// the host thread itself.
class CpuTimer final : public Timer {
 public:
  explicit CpuTimer(Clock* clock = Clock::Steady()) : clock_(clock) {}
  void Start() override { start_ = clock_->NowNanos(); }
  void Stop() override { stop_ = clock_->NowNanos(); }
  int64_t ElapsedNanos() override { return stop_ - start_; }

 private:
  Clock* clock_;
  int64_t start_ = 0;
  int64_t stop_ = 0;
};

// Synchronises the device before reading the host clock at each end: the time of everything
// the region queued, on any stream, plus the synchronisation's own latency.
std::unique_ptr<Timer> MakeSyncingTimer(base::Device device, DeviceApi* api);

using TimerFactory = std::function<absl::StatusOr<std::unique_ptr<Timer>>(base::Device)>;

class TimerRegistry {
 public:
  // An empty registry: every type gets the default timer. Global() has cpu registered.
  TimerRegistry() = default;

  // The process's registry, with the CPU timer registered.
  static TimerRegistry& Global();

  // Makes `factory` create the timers of `type`, replacing any earlier one.
  void Register(base::DeviceType type, TimerFactory factory) ABSL_LOCKS_EXCLUDED(mutex_);

  // A timer for `device` from its type's factory; without one, a timer that synchronises the
  // device (through its DeviceApi) around the steady clock, with one warning per device type
  // that it may be inaccurate. FAILED_PRECONDITION when the type has no DeviceApi either.
  absl::StatusOr<std::unique_ptr<Timer>> Create(base::Device device) ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  absl::Mutex mutex_;
  std::map<base::DeviceType, TimerFactory> factories_ ABSL_GUARDED_BY(mutex_);
  std::set<base::DeviceType> warned_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kprof::core

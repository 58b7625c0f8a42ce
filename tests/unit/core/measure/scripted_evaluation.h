// A TimeEvaluator whose timer reads a script of durations (the last one repeating), each read
// advancing a fake clock by what it read: the time evaluator's tests of growth, convergence and
// flushes, without real time.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/measure/time_evaluator.h"
#include "fake_clock.h"

namespace kprof::core {

inline constexpr base::Device kScriptCpu{base::DeviceType::kCpu, 0};

// Timers that read a scripted sequence of durations, one per timed attempt; the evaluated
// function counts its calls so the test sees each attempt's number.
class ScriptedEvaluation {
 public:
  explicit ScriptedEvaluation(std::vector<absl::Duration> readings)
      : readings_(readings.begin(), readings.end()) {}

  TimeEvaluator Evaluator(DeviceApi* api = nullptr) {
    return TimeEvaluator(
        kScriptCpu, api != nullptr ? api : *GetDeviceApi(base::DeviceType::kCpu),
        [this](base::Device) -> absl::StatusOr<std::unique_ptr<Timer>> {
          return std::make_unique<Scripted>(this);
        },
        &clock_);
  }

  absl::Status Call() {
    ++calls_;
    events_.push_back("call");
    return absl::OkStatus();
  }

  // The calls made by each timed attempt, in order.
  const std::vector<int64_t>& attempts() const { return attempts_; }
  std::vector<std::string>& events() { return events_; }
  ::kprof::testing::FakeClock& clock() { return clock_; }
  int64_t calls() const { return calls_; }

 private:
  class Scripted final : public Timer {
   public:
    explicit Scripted(ScriptedEvaluation* owner) : owner_(owner) {}
    void Start() override {
      calls_at_start_ = owner_->calls_;
      owner_->events_.push_back("start");
    }
    void Stop() override {
      owner_->events_.push_back("stop");
      owner_->attempts_.push_back(owner_->calls_ - calls_at_start_);
      if (owner_->readings_.empty()) {
        reading_ = absl::ZeroDuration();
        return;
      }
      reading_ = owner_->readings_.front();
      if (owner_->readings_.size() > 1) owner_->readings_.pop_front();  // the last one repeats
      owner_->clock_.Advance(reading_);  // the attempt took the time it read
    }
    int64_t ElapsedNanos() override { return absl::ToInt64Nanoseconds(reading_); }

   private:
    ScriptedEvaluation* owner_;
    int64_t calls_at_start_ = 0;
    absl::Duration reading_;
  };

  std::deque<absl::Duration> readings_;
  std::vector<int64_t> attempts_;
  std::vector<std::string> events_;
  ::kprof::testing::FakeClock clock_;
  int64_t calls_ = 0;
};

}  // namespace kprof::core

#include "core/device/timer.h"

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "core/cuda/cuda_backend.h"
#include "core/device/device_api.h"

namespace kprof::core {
namespace {

// Synchronises the device before reading the host clock at each end, so the region covers all
// device work queued inside it — at the price of the synchronisation's own latency.
class SyncingTimer final : public Timer {
 public:
  SyncingTimer(base::Device device, DeviceApi* api) : device_(device), api_(api) {}
  void Start() override {
    Keep(api_->Sync(device_));
    clock_.Start();
  }
  void Stop() override {
    Keep(api_->Sync(device_));
    clock_.Stop();
  }
  int64_t ElapsedNanos() override { return clock_.ElapsedNanos(); }
  absl::Status status() const override { return status_; }

 private:
  void Keep(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  absl::Status status_;
  base::Device device_;
  DeviceApi* api_;
  CpuTimer clock_;
};

}  // namespace

std::unique_ptr<Timer> MakeSyncingTimer(base::Device device, DeviceApi* api) {
  return std::make_unique<SyncingTimer>(device, api);
}

TimerRegistry& TimerRegistry::Global() {
  static TimerRegistry* const registry = [] {
    auto* r = new TimerRegistry();
    r->Register(base::DeviceType::kCpu, [](base::Device) -> absl::StatusOr<std::unique_ptr<Timer>> {
      return std::make_unique<CpuTimer>();
    });
    RegisterCudaTimer(*r);
    return r;
  }();
  return *registry;
}

void TimerRegistry::Register(base::DeviceType type, TimerFactory factory) {
  absl::MutexLock lock(&mutex_);
  factories_[type] = std::move(factory);
}

absl::StatusOr<std::unique_ptr<Timer>> TimerRegistry::Create(base::Device device) {
  TimerFactory factory;
  bool warn = false;
  {
    absl::MutexLock lock(&mutex_);
    if (const auto it = factories_.find(device.type); it != factories_.end()) {
      factory = it->second;
    } else {
      warn = warned_.insert(device.type).second;
    }
  }
  if (factory) return factory(device);

  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(device.type));
  if (warn) {
    base::Log(
        base::LogSeverity::kWarning,
        absl::StrCat("no timer for device type '", std::string(base::DeviceTypeName(device.type)),
                     "': using the host clock around device synchronisation, which may be "
                     "inaccurate or add overhead"));
  }
  return std::make_unique<SyncingTimer>(device, api);
}

}  // namespace kprof::core

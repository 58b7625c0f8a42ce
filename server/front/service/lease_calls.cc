// The Lease RPC: one bidirectional stream per lease, its requests read here and its updates
// written as the LeaseManager reports them (from its own thread).
#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "server/front/scheduling/lease_manager.h"
#include "server/front/service/grpc_status.h"
#include "server/front/service/profiler_service.h"

namespace kprof::server {

using kprof::v1::LeaseInfo;
using kprof::v1::LeaseRequest;
using kprof::v1::LeaseUpdate;

class ProfilerService::LeaseReactor final
    : public grpc::ServerBidiReactor<LeaseRequest, LeaseUpdate> {
 public:
  LeaseReactor(ProfilerService* service, std::string client)
      : service_(service), client_(std::move(client)) {}

  // What the manager says, passed on while the reactor lives; shared with the manager, which
  // may call it after the call is gone.
  class Relay final : public LeaseManager::Listener {
   public:
    explicit Relay(LeaseReactor* reactor) : reactor_(reactor) {}
    void Waiting(const LeaseInfo& held) override {
      Send(LeaseUpdate::WAITING, held, "", "", false);
    }
    void Granted(const LeaseInfo& lease) override {
      Send(LeaseUpdate::GRANTED, lease, "", "", false);
    }
    void Ended(const LeaseInfo& lease, const std::string& reason,
               const std::string& restored) override {
      Send(LeaseUpdate::ENDED, lease, reason, restored, true);
    }
    void Detach() {
      absl::MutexLock lock(&mutex_);
      reactor_ = nullptr;
    }

   private:
    void Send(LeaseUpdate::State state, const LeaseInfo& info, const std::string& reason,
              const std::string& restored, bool last) {
      LeaseUpdate update;
      update.set_state(state);
      *update.mutable_lease() = info;
      update.set_end_reason(reason);
      update.set_clocks_restored(restored);
      absl::MutexLock lock(&mutex_);
      if (reactor_ != nullptr) reactor_->Send(std::move(update), last);
    }
    absl::Mutex mutex_;
    LeaseReactor* reactor_ ABSL_GUARDED_BY(mutex_);
  };

  void Begin(const absl::Status& admitted) {
    if (!admitted.ok()) {
      FinishWith(admitted);
      return;
    }
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    std::optional<uint64_t> ticket;
    {
      absl::MutexLock lock(&mutex_);
      ticket = ticket_;
    }
    if (!ok) {
      // The holder half-closed or went away: the lease ends (a call that never asked just ends).
      if (ticket.has_value()) {
        service_->leases_->Release(*ticket, "released (the holder closed the call)");
      } else {
        FinishWith(absl::InvalidArgumentError("the Lease call ended before asking for a device"));
      }
      return;
    }
    if (ticket.has_value()) {
      if (incoming_.release()) service_->leases_->Release(*ticket, "released");
      ReadNext();
      return;
    }
    const absl::StatusOr<DeviceExecutor*> executor = service_->FindExecutor(incoming_.device());
    if (!executor.ok()) {
      FinishWith(executor.status());
      return;
    }
    if (!std::isfinite(incoming_.seconds())) {
      FinishWith(absl::InvalidArgumentError(
          "LeaseRequest.seconds must be a finite number of seconds above 0"));
      return;
    }
    // Past a year: refused as longer than --max-lease, without overflowing a Duration.
    incoming_.set_seconds(std::min(incoming_.seconds(), 365.0 * 86400));
    relay_ = std::make_shared<Relay>(this);
    const absl::StatusOr<uint64_t> granted =
        service_->leases_->Request(client_, *executor, absl::Seconds(incoming_.seconds()),
                                   incoming_.lock_clocks(), incoming_.clock_mhz(), relay_);
    if (!granted.ok()) {
      FinishWith(granted.status());
      return;
    }
    {
      absl::MutexLock lock(&mutex_);
      ticket_ = *granted;
    }
    ReadNext();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mutex_);
    writing_ = false;
    if (!outbox_.empty()) outbox_.pop_front();
    if (!ok) outbox_.clear();  // the holder is gone; the lease ends as it cancels
    WriteNext();
  }

  void OnCancel() override {
    std::optional<uint64_t> ticket;
    {
      absl::MutexLock lock(&mutex_);
      ticket = ticket_;
    }
    if (ticket.has_value()) service_->leases_->Release(*ticket, "the holder disconnected");
  }

  void OnDone() override {
    if (relay_ != nullptr) relay_->Detach();
    std::optional<uint64_t> ticket;
    {
      absl::MutexLock lock(&mutex_);
      ticket = ticket_;
    }
    if (ticket.has_value()) service_->leases_->Release(*ticket, "the holder disconnected");
    delete this;
  }

  // An update to write; `last` finishes the call once it is written (or cannot be).
  void Send(LeaseUpdate update, bool last) {
    absl::MutexLock lock(&mutex_);
    if (finished_) return;
    outbox_.push_back(std::move(update));
    finish_after_ |= last;
    WriteNext();
  }

 private:
  // The next message, unless the call is finished already (an ENDED written meanwhile).
  void ReadNext() {
    absl::MutexLock lock(&mutex_);
    if (!finished_) StartRead(&incoming_);
  }

  void WriteNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (writing_ || finished_) return;
    if (!outbox_.empty()) {
      writing_ = true;
      StartWrite(&outbox_.front());
    } else if (finish_after_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  void FinishWith(const absl::Status& status) {
    absl::MutexLock lock(&mutex_);
    if (finished_) return;
    finished_ = true;
    Finish(ToGrpcStatus(status));
  }

  ProfilerService* service_;
  const std::string client_;
  LeaseRequest incoming_;
  std::shared_ptr<Relay> relay_;
  absl::Mutex mutex_;
  std::optional<uint64_t> ticket_ ABSL_GUARDED_BY(mutex_);
  std::deque<LeaseUpdate> outbox_ ABSL_GUARDED_BY(mutex_);  // the front one is being written
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool finish_after_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
};

grpc::ServerBidiReactor<LeaseRequest, LeaseUpdate>* ProfilerService::Lease(
    grpc::CallbackServerContext* context) {
  absl::StatusOr<std::string> client = Authenticate(context);
  absl::Status admitted = client.status();
  if (admitted.ok() && leases_ == nullptr) {
    admitted = absl::UnimplementedError("this daemon grants no leases");
  }
  if (admitted.ok() && draining_) admitted = absl::UnavailableError("kprofd is shutting down");
  auto* reactor = new LeaseReactor(this, client.ok() ? *std::move(client) : "");
  reactor->Begin(admitted);
  return reactor;
}

absl::StatusOr<std::optional<ProfilerService::LeaseMark>> ProfilerService::CheckLease(
    const grpc::CallbackServerContext* context, const std::string& client) const {
  const auto& metadata = context->client_metadata();
  const auto it = metadata.find("kprof-lease");
  if (it == metadata.end()) return std::nullopt;
  const std::string id(it->second.data(), it->second.size());
  if (leases_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the call carries lease ", id, ", and this daemon grants no leases"));
  }
  KPROF_ASSIGN_OR_RETURN(const base::Device device, leases_->CheckLeaseId(client, id));
  return LeaseMark{id, device};
}

}  // namespace kprof::server

// LeaseManager: device leases (the Lease RPC). One client holds a device at a time; who asks
// while it is held waits, in the order they asked. A lease begins once the device runs no other
// client's job (the executor's gate takes back what was handed on) and its clocks are locked or
// recorded; it ends on release, when its holder disconnects, at its end, or as the daemon stops,
// and its clocks are put back once the holder's running job is over. Clock changes go through
// kprofd-worker --clocks (NVML is never loaded into the daemon), journalled in a state file so
// that a daemon killed mid-lease puts them back at its next start (RestoreLeftovers).
//
// Every transition runs on the manager's own thread, in order; a listener (the RPC's reactor)
// is told of each from there. What a step does is independent of how many leases wait: each
// device keeps its queue, and the manager looks at the leases held alone. A client holds one
// lease and waits for two at most, and the next lease of a device goes to another client than
// the last when one waits; LeaseLimits keeps each client within its hourly budget.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/device.h"
#include "kprof/v1/kprof.pb.h"
#include "server/front/scheduling/device_executor.h"
#include "server/front/scheduling/lease_limits.h"

namespace kprof::server {

struct LeaseOptions {
  bool anyone = false;            // every client may lease
  std::set<std::string> clients;  // else these (labels or certificate subjects)
  absl::Duration max_lease = absl::Minutes(30);
  absl::Duration budget = absl::Minutes(30);  // a client's leases in any hour (LeaseLimits)
  std::string state_dir;                      // each lease's clock journal: clocks-LEASE_ID.json
  std::string helper;                         // kprofd-worker, run with --clocks
  std::string sysfs_root = "/";
  absl::Duration helper_timeout = absl::Seconds(30);
  std::vector<int> cpus;  // a cpu:0 lease's clocks: these CPUs' alone (--pin-cpus); empty: all
  int64_t floor_mhz = 0;  // the lowest clock a lease may ask for (--lock-floor-mhz); 0: base
};

class LeaseManager {
 public:
  // What a lease's caller is told, from the manager's thread.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void Waiting(const kprof::v1::LeaseInfo& held) = 0;
    virtual void Granted(const kprof::v1::LeaseInfo& lease) = 0;
    // The last call: the lease (or the wait for it) is over.
    virtual void Ended(const kprof::v1::LeaseInfo& lease, const std::string& reason,
                       const std::string& clocks_restored) = 0;
  };

  explicit LeaseManager(LeaseOptions options);
  ~LeaseManager();  // Stop()

  // Asks for `device` for `length`, for `client`; `listener` (shared with the caller, kept until
  // Ended) hears what follows. A ticket for Release. PERMISSION_DENIED for a client that may not
  // lease; INVALID_ARGUMENT for a length not above 0 or past the maximum; RESOURCE_EXHAUSTED
  // past the client's limits (LeaseLimits); UNAVAILABLE once stopping.
  absl::StatusOr<uint64_t> Request(const std::string& client, DeviceExecutor* executor,
                                   absl::Duration length, bool lock_clocks, int32_t clock_mhz,
                                   std::shared_ptr<Listener> listener) ABSL_LOCKS_EXCLUDED(mutex_);

  // Ends the lease (or the wait for it) of `ticket`, saying `reason`. Idempotent.
  void Release(uint64_t ticket, std::string reason) ABSL_LOCKS_EXCLUDED(mutex_);

  // For a call carrying lease id `id`: the device of the lease `client` holds under it now.
  // FAILED_PRECONDITION when that lease has ended or never was; PERMISSION_DENIED when it is
  // another client's.
  absl::StatusOr<base::Device> CheckLeaseId(const std::string& client, const std::string& id) const
      ABSL_LOCKS_EXCLUDED(mutex_);

  // The lease held on `device` now, for GetInfo.
  std::optional<kprof::v1::LeaseInfo> Held(const base::Device& device) const
      ABSL_LOCKS_EXCLUDED(mutex_);

  // Ends every lease ("kprofd is stopping") and puts their clocks back; then refuses new ones.
  void Stop() ABSL_LOCKS_EXCLUDED(mutex_);

  // At the daemon's start: puts back what the leases of an earlier run left changed, as their
  // journals say; a line saying what ("" when nothing was).
  static absl::StatusOr<std::string> RestoreLeftovers(const LeaseOptions& options);

 private:
  enum class State { kWaiting, kStarting, kHeld, kEnding, kEnded };
  struct Lease {
    uint64_t ticket = 0;
    std::string id;
    std::string client;
    DeviceExecutor* executor = nullptr;
    absl::Duration length;
    bool lock_clocks = false;
    int32_t clock_mhz = 0;
    std::shared_ptr<Listener> listener;
    State state = State::kWaiting;
    std::string end_reason;
    bool clocks_changed = false;
    kprof::v1::LeaseInfo info;
  };

  void Loop();
  void Post(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mutex_);
  // On the manager's thread.
  // These three are called with the lock held, and let it go around the executor's gate.
  void Begin(Lease& lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void End(Lease& lease, std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void StartNext(DeviceExecutor* executor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The waiting lease of `executor` to begin next, taken off its queue; 0 when none waits.
  uint64_t NextWaiting(DeviceExecutor* executor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Forgets a lease that is over: its entry, its id, what it counted against its client.
  void Forget(uint64_t ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Grant(uint64_t ticket) ABSL_LOCKS_EXCLUDED(mutex_);
  void Finish(uint64_t ticket) ABSL_LOCKS_EXCLUDED(mutex_);
  // "cuda:0 is leased to alice until 2026-12-03T10:42:05Z"
  static std::string What(const Lease& lease);
  static void SetEnd(Lease& lease, absl::Time ends);
  // The clock journal of lease `id`.
  std::string Journal(const std::string& id) const;
  // Puts back what lease `lease` changed: a line saying what, or why not.
  std::string Restore(const Lease& lease) const;
  // Runs kprofd-worker --clocks with `args`; its JSON answer.
  static absl::StatusOr<std::string> RunHelper(const LeaseOptions& options,
                                               std::vector<std::string> args);

  const LeaseOptions options_;

  mutable absl::Mutex mutex_;
  std::map<uint64_t, Lease> leases_ ABSL_GUARDED_BY(mutex_);            // waiting, held, ending
  std::map<std::string, uint64_t> by_id_ ABSL_GUARDED_BY(mutex_);       // their tickets by id
  std::map<DeviceExecutor*, uint64_t> holder_ ABSL_GUARDED_BY(mutex_);  // by device
  // Each device's waiting leases in the order asked (some of them ended: skipped), and the
  // client whose lease it granted last.
  std::map<DeviceExecutor*, std::deque<uint64_t>> waiting_ ABSL_GUARDED_BY(mutex_);
  std::map<DeviceExecutor*, std::string> last_client_ ABSL_GUARDED_BY(mutex_);
  LeaseLimits limits_ ABSL_GUARDED_BY(mutex_);
  // Leases ended lately, by id: why, for a call that still carries one.
  std::map<std::string, std::string> ended_ ABSL_GUARDED_BY(mutex_);
  std::deque<std::string> ended_order_ ABSL_GUARDED_BY(mutex_);
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mutex_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  bool stopped_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace kprof::server

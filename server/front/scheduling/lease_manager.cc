#include "server/front/scheduling/lease_manager.h"

#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "core/host/placement.h"
#include "nlohmann/json.hpp"

namespace kprof::server {
namespace {

using json = nlohmann::json;

constexpr size_t kEndedKept = 256;

std::string NewLeaseId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    // No entropy from OpenSSL: the id is still unique in this process, if guessable.
    static std::atomic<uint64_t> counter{0};
    return absl::StrCat("lease-", getpid(), "-", ++counter);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

std::string TimeText(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

}  // namespace

LeaseManager::LeaseManager(LeaseOptions options)
    : options_(std::move(options)), limits_(options_.budget), thread_([this] { Loop(); }) {}

LeaseManager::~LeaseManager() { Stop(); }

absl::StatusOr<uint64_t> LeaseManager::Request(const std::string& client, DeviceExecutor* executor,
                                               absl::Duration length, bool lock_clocks,
                                               int32_t clock_mhz,
                                               std::shared_ptr<Listener> listener) {
  if (!options_.anyone && options_.clients.count(client) == 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "client '", client, "' may not lease devices on this daemon (kprofd --lease-clients ",
        options_.clients.empty() ? "names none" : absl::StrJoin(options_.clients, ","), ")"));
  }
  if (length <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("a lease needs a length above 0 (LeaseRequest.seconds)");
  }
  if (length > options_.max_lease) {
    return absl::InvalidArgumentError(
        absl::StrCat("a lease of ", absl::FormatDuration(length),
                     " is longer than this daemon allows (kprofd --max-lease ",
                     absl::FormatDuration(options_.max_lease), ")"));
  }
  if (clock_mhz < 0) return absl::InvalidArgumentError("clock_mhz must not be negative");
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&mutex_);
    if (stopping_) return absl::UnavailableError("kprofd is shutting down and grants no leases");
    KPROF_RETURN_IF_ERROR(limits_.Admit(client, length, absl::Now()));
    ticket = next_ticket_++;
    Lease& lease = leases_[ticket];
    lease.ticket = ticket;
    lease.id = NewLeaseId();
    lease.client = client;
    lease.executor = executor;
    lease.length = length;
    lease.lock_clocks = lock_clocks;
    lease.clock_mhz = clock_mhz;
    lease.listener = std::move(listener);
    lease.info.set_lease_id(lease.id);
    lease.info.set_device(base::DeviceSpec(executor->device()));
    lease.info.set_holder(client);
    by_id_[lease.id] = ticket;
    waiting_[executor].push_back(ticket);
  }
  Post([this, ticket] {
    std::shared_ptr<Listener> told;
    kprof::v1::LeaseInfo held;
    {
      absl::MutexLock lock(&mutex_);
      auto it = leases_.find(ticket);
      if (it == leases_.end() || it->second.state != State::kWaiting) return;
      DeviceExecutor* const device = it->second.executor;
      if (holder_.count(device) == 0) {
        // The device is free: its next lease begins, this one or another client's before it
        // (which lets go of the lock on the way: found again after).
        StartNext(device);
        it = leases_.find(ticket);
        if (it == leases_.end() || it->second.state != State::kWaiting) return;
      }
      const auto holder = holder_.find(device);
      if (holder == holder_.end()) return;
      told = it->second.listener;
      held = leases_.at(holder->second).info;
      held.clear_lease_id();  // the holder's to know
    }
    told->Waiting(held);
  });
  return ticket;
}

void LeaseManager::Release(uint64_t ticket, std::string reason) {
  Post([this, ticket, reason = std::move(reason)]() mutable {
    absl::MutexLock lock(&mutex_);
    const auto it = leases_.find(ticket);
    if (it != leases_.end()) End(it->second, std::move(reason));
  });
}

absl::StatusOr<base::Device> LeaseManager::CheckLeaseId(const std::string& client,
                                                        const std::string& id) const {
  absl::MutexLock lock(&mutex_);
  if (const auto found = by_id_.find(id); found != by_id_.end()) {
    const Lease& lease = leases_.at(found->second);
    if (lease.client != client) {
      return absl::PermissionDeniedError(absl::StrCat(
          "lease ", id, " is another client's; the call's credentials are ", client, "'s"));
    }
    switch (lease.state) {
      case State::kHeld:
        return lease.executor->device();
      case State::kWaiting:
      case State::kStarting:
        return absl::FailedPreconditionError(absl::StrCat("lease ", id, " is not granted yet"));
      case State::kEnding:
      case State::kEnded:
        return absl::FailedPreconditionError(
            absl::StrCat("lease ", id, " has ended (", lease.end_reason,
                         "); calls that carry it are refused once it has"));
    }
  }
  if (const auto ended = ended_.find(id); ended != ended_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("lease ", id, " has ended (", ended->second,
                     "); calls that carry it are refused once it has"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no lease ", id,
                   " on this daemon (the call carries it as kprof-lease, from "
                   "$KPROF_LEASE): it ended before the daemon restarted, or is another daemon's"));
}

std::optional<kprof::v1::LeaseInfo> LeaseManager::Held(const base::Device& device) const {
  absl::MutexLock lock(&mutex_);
  for (const auto& [executor, ticket] : holder_) {
    if (executor->device() != device) continue;
    const Lease& lease = leases_.at(ticket);
    if (lease.state == State::kHeld || lease.state == State::kEnding) return lease.info;
  }
  return std::nullopt;
}

void LeaseManager::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    if (stopped_) return;
    stopping_ = true;
    for (auto& [ticket, lease] : leases_) {
      work_.push_back([this, t = ticket] {
        absl::MutexLock inner(&mutex_);
        if (const auto it = leases_.find(t); it != leases_.end()) {
          End(it->second, "kprofd is stopping");
        }
      });
    }
    // The holder's running job finishes before the clocks go back, within the service manager's
    // patience (systemd's TimeoutStopSec is 30 s); then they go back with it still running.
    const auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return leases_.empty(); };
    mutex_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(15));
    stopped_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // What did not end in time ends now, on this thread: the manager's has gone.
  std::map<uint64_t, Lease> left;
  {
    absl::MutexLock lock(&mutex_);
    left.swap(leases_);
    holder_.clear();
  }
  for (auto& [ticket, lease] : left) {
    std::string restored;
    if (lease.state != State::kWaiting && lease.lock_clocks) restored = Restore(lease);
    if (lease.state != State::kWaiting) lease.executor->SetLease(std::nullopt);
    base::Log(base::LogSeverity::kWarning,
              absl::StrCat("lease ", lease.id.substr(0, 8),
                           " ended as kprofd stopped, without waiting for its "
                           "job",
                           restored.empty() ? "" : "; clocks: ", restored));
    lease.listener->Ended(lease.info, "kprofd is stopping", restored);
  }
}

void LeaseManager::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mutex_);
  work_.push_back(std::move(fn));
}

void LeaseManager::Loop() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mutex_);
      absl::Time next = absl::InfiniteFuture();
      for (const auto& [executor, ticket] : holder_) {
        const Lease& lease = leases_.at(ticket);
        if (lease.state == State::kHeld) {
          next = std::min(next, absl::FromUnixMillis(lease.info.ends_unix_ms()));
        }
      }
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
        return !work_.empty() || stopped_;
      };
      mutex_.AwaitWithDeadline(absl::Condition(&ready), next);
      if (work_.empty()) {
        if (stopped_) return;
        const absl::Time now = absl::Now();
        std::vector<uint64_t> expired;
        for (const auto& [executor, ticket] : holder_) {
          const Lease& lease = leases_.at(ticket);
          if (lease.state == State::kHeld &&
              absl::FromUnixMillis(lease.info.ends_unix_ms()) <= now) {
            expired.push_back(ticket);
          }
        }
        for (const uint64_t ticket : expired) {
          if (const auto it = leases_.find(ticket); it != leases_.end()) End(it->second, "expired");
        }
        continue;
      }
      fn = std::move(work_.front());
      work_.pop_front();
    }
    fn();
  }
}

std::string LeaseManager::What(const Lease& lease) {
  return absl::StrCat(lease.info.device(), " is leased to ", lease.client, " until ",
                      TimeText(absl::FromUnixMillis(lease.info.ends_unix_ms())));
}

void LeaseManager::SetEnd(Lease& lease, absl::Time ends) {
  lease.info.set_ends_unix_ms(absl::ToUnixMillis(ends));
}

void LeaseManager::Begin(Lease& lease) {
  lease.state = State::kStarting;
  holder_[lease.executor] = lease.ticket;
  // Until granted, the end is what it would be were it granted now.
  SetEnd(lease, absl::Now() + lease.length);
  DeviceExecutor::LeaseGate gate{
      lease.client, lease.id, false, false, absl::FromUnixMillis(lease.info.ends_unix_ms()),
      What(lease)};
  DeviceExecutor* executor = lease.executor;
  const uint64_t ticket = lease.ticket;
  // Outside the lock: the gate answers refused jobs, and runs `clear` at once on a stopped
  // executor.
  mutex_.Unlock();
  executor->SetLease(std::move(gate), [this, ticket] { Post([this, ticket] { Grant(ticket); }); });
  mutex_.Lock();
}

void LeaseManager::Grant(uint64_t ticket) {
  Lease copy;
  {
    absl::MutexLock lock(&mutex_);
    const auto it = leases_.find(ticket);
    if (it == leases_.end() || it->second.state != State::kStarting) return;
    copy = it->second;
  }
  std::vector<std::string> args = {copy.lock_clocks ? "lock" : "record",
                                   "--device",
                                   copy.info.device(),
                                   "--state",
                                   Journal(copy.id),
                                   "--sysfs-root",
                                   options_.sysfs_root};
  if (copy.clock_mhz > 0) {
    args.push_back("--mhz");
    args.push_back(absl::StrCat(copy.clock_mhz));
  }
  if (!options_.cpus.empty()) {
    args.push_back("--cpus");
    args.push_back(core::FormatCpuList(options_.cpus));
  }
  if (options_.floor_mhz > 0) {
    args.push_back("--floor-mhz");
    args.push_back(absl::StrCat(options_.floor_mhz));
  }
  const absl::StatusOr<std::string> answer = RunHelper(options_, std::move(args));
  kprof::v1::LeaseInfo info = copy.info;
  if (answer.ok()) {
    const json doc = json::parse(*answer, nullptr, false);
    info.set_clocks_locked(doc.value("locked", false));
    info.set_clocks_note(doc.value("note", ""));
    if (doc.contains("settings") && doc["settings"].is_array()) {
      for (const json& s : doc["settings"]) {
        kprof::v1::ClockSetting* setting = info.add_clocks();
        setting->set_name(s.value("name", ""));
        setting->set_before(s.value("before", ""));
        setting->set_during(s.value("during", ""));
      }
    }
  } else if (copy.lock_clocks && absl::IsInvalidArgument(answer.status()) &&
             absl::StartsWith(answer.status().message(), "clock_mhz")) {
    // The frequency asked for is not one the device takes: the lease is refused, not granted
    // with clocks other than asked (nothing was changed; Finish puts back nothing).
    absl::MutexLock lock(&mutex_);
    if (const auto it = leases_.find(ticket); it != leases_.end()) it->second.clocks_changed = true;
    if (const auto it = leases_.find(ticket); it != leases_.end()) {
      End(it->second, absl::StrCat("refused: ", answer.status().message()));
    }
    return;
  } else {
    info.set_clocks_note(absl::StrCat(copy.lock_clocks ? "not locked: " : "not recorded: ",
                                      answer.status().message()));
  }
  std::shared_ptr<Listener> listener;
  DeviceExecutor::LeaseGate gate;
  {
    absl::MutexLock lock(&mutex_);
    const auto it = leases_.find(ticket);
    if (it == leases_.end()) return;
    Lease& lease = it->second;
    lease.clocks_changed = lease.lock_clocks;  // a restore of nothing changed is a no-op
    const int64_t ends = absl::ToUnixMillis(absl::Now() + lease.length);
    info.set_ends_unix_ms(ends);
    lease.info = info;
    if (lease.state != State::kStarting) return;  // released meanwhile: Finish puts them back
    lease.state = State::kHeld;
    limits_.Granted(lease.client, ticket, absl::Now(), lease.length);
    gate = {lease.client, lease.id, true, false, absl::FromUnixMillis(ends), What(lease)};
    listener = lease.listener;
  }
  copy.executor->SetLease(std::move(gate));
  base::Log(
      base::LogSeverity::kInfo,
      absl::StrCat("lease ", info.lease_id().substr(0, 8), ": ", info.device(), " to ",
                   info.holder(), " until ", TimeText(absl::FromUnixMillis(info.ends_unix_ms())),
                   info.clocks_locked() ? ", clocks locked" : ""),
      {{"LEASE_ID", info.lease_id().substr(0, 8)},
       {"DEVICE", info.device()},
       {"CLIENT", info.holder()}});
  listener->Granted(info);
}

void LeaseManager::End(Lease& lease, std::string reason) {
  switch (lease.state) {
    case State::kWaiting: {
      std::shared_ptr<Listener> listener = lease.listener;
      const uint64_t ticket = lease.ticket;
      const kprof::v1::LeaseInfo info = lease.info;
      Forget(ticket);
      mutex_.Unlock();
      listener->Ended(info, reason, "");
      mutex_.Lock();
      return;
    }
    case State::kStarting:
    case State::kHeld: {
      lease.state = State::kEnding;
      lease.end_reason = std::move(reason);
      // The device is free once the holder's running job ends: others' jobs queue as usual.
      DeviceExecutor::LeaseGate gate{
          lease.client,
          lease.id,
          false,
          true,
          absl::Now(),
          absl::StrCat(lease.info.device(), "'s lease to ", lease.client, " is ending")};
      DeviceExecutor* executor = lease.executor;
      const uint64_t ticket = lease.ticket;
      mutex_.Unlock();
      executor->SetLease(std::move(gate),
                         [this, ticket] { Post([this, ticket] { Finish(ticket); }); });
      mutex_.Lock();
      return;
    }
    case State::kEnding:
    case State::kEnded:
      return;
  }
}

void LeaseManager::Finish(uint64_t ticket) {
  Lease lease;
  {
    absl::MutexLock lock(&mutex_);
    const auto it = leases_.find(ticket);
    if (it == leases_.end() || it->second.state != State::kEnding) return;
    it->second.state = State::kEnded;
    lease = it->second;
  }
  const std::string restored = lease.clocks_changed ? Restore(lease) : "";
  lease.executor->SetLease(std::nullopt);
  base::Log(base::LogSeverity::kInfo,
            absl::StrCat("lease ", lease.id.substr(0, 8), " on ", lease.info.device(), " ended: ",
                         lease.end_reason, restored.empty() ? "" : "; clocks: ", restored),
            {{"LEASE_ID", lease.id.substr(0, 8)},
             {"DEVICE", lease.info.device()},
             {"CLIENT", lease.client}});
  {
    absl::MutexLock lock(&mutex_);
    Forget(ticket);
    last_client_[lease.executor] = lease.client;
    if (const auto holder = holder_.find(lease.executor);
        holder != holder_.end() && holder->second == ticket) {
      holder_.erase(holder);
    }
    ended_[lease.id] = lease.end_reason;
    ended_order_.push_back(lease.id);
    if (ended_order_.size() > kEndedKept) {
      ended_.erase(ended_order_.front());
      ended_order_.pop_front();
    }
  }
  lease.listener->Ended(lease.info, lease.end_reason, restored);
  absl::MutexLock lock(&mutex_);
  StartNext(lease.executor);
}

void LeaseManager::StartNext(DeviceExecutor* executor) {
  while (holder_.count(executor) == 0) {
    const uint64_t ticket = NextWaiting(executor);
    if (ticket == 0) return;
    Lease& lease = leases_.at(ticket);
    if (absl::Status fits = limits_.CheckBudget(lease.client, lease.length, absl::Now());
        !fits.ok()) {
      End(lease, absl::StrCat("refused: ", fits.message()));  // and on to the next
      continue;
    }
    Begin(lease);
  }
}

uint64_t LeaseManager::NextWaiting(DeviceExecutor* executor) {
  std::deque<uint64_t>& queue = waiting_[executor];
  const auto waits = [this](uint64_t ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const auto it = leases_.find(ticket);
    return it != leases_.end() && it->second.state == State::kWaiting;
  };
  while (!queue.empty() && !waits(queue.front())) queue.pop_front();
  if (queue.empty()) return 0;
  // The first in line, unless it is the last holder's and another client waits: a client waits
  // for two leases at most, so this looks a few places down the queue at most.
  const std::string& last = last_client_[executor];
  auto pick = queue.begin();
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    if (waits(*it) && leases_.at(*it).client != last) {
      pick = it;
      break;
    }
  }
  const uint64_t ticket = *pick;
  queue.erase(pick);
  return ticket;
}

void LeaseManager::Forget(uint64_t ticket) {
  const auto it = leases_.find(ticket);
  if (it == leases_.end()) return;
  limits_.Ended(it->second.client, ticket, absl::Now());
  by_id_.erase(it->second.id);
  if (it->second.state == State::kWaiting) {
    std::deque<uint64_t>& queue = waiting_[it->second.executor];
    queue.erase(std::remove(queue.begin(), queue.end(), ticket), queue.end());
  }
  leases_.erase(it);
}

}  // namespace kprof::server

// LeaseLimits: what one client may take of a daemon's leases. At most one lease held and
// kMaxWaiting waiting per client, so that no client queues leases ahead of another's; and in
// any hour, leases granted for at most `budget` in all (each counted for its length, or for the
// time it was held when it ended early), so that no client holds a device again and again.
// Not thread-safe: the lease manager's lock guards it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kprof::server {

class LeaseLimits {
 public:
  static constexpr int kMaxWaiting = 2;  // a client's leases waiting, beside the one it holds

  explicit LeaseLimits(absl::Duration budget) : budget_(budget) {}

  // A new lease of `client`'s, for `length`: counted, or RESOURCE_EXHAUSTED saying which limit
  // it meets (too many at once; past its hour's budget now).
  absl::Status Admit(const std::string& client, absl::Duration length, absl::Time now);
  // Whether a lease of `length` may be granted to `client` now: RESOURCE_EXHAUSTED naming the
  // budget, what the client had of it and when there is room, else OK.
  absl::Status CheckBudget(const std::string& client, absl::Duration length, absl::Time now);
  // Lease `ticket` of `client` was granted at `now` for `length`.
  void Granted(const std::string& client, uint64_t ticket, absl::Time now, absl::Duration length);
  // Lease `ticket` of `client` is over (granted or not); a granted one counts until `now`.
  void Ended(const std::string& client, uint64_t ticket, absl::Time now);

 private:
  struct Grant {
    uint64_t ticket;
    absl::Time from, to;
  };
  struct Client {
    int live = 0;              // leases waiting or held
    std::deque<Grant> grants;  // of the last hour, oldest first
  };
  // The time of `client`'s grants within the hour before `now`, the old ones dropped.
  absl::Duration Used(Client& client, absl::Time now);

  const absl::Duration budget_;
  std::map<std::string, Client> clients_;  // those with leases now or in the last hour
};

}  // namespace kprof::server

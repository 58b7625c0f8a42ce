#include "server/front/scheduling/lease_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kprof::server {
namespace {

constexpr absl::Duration kWindow = absl::Hours(1);

std::string When(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

}  // namespace

absl::Duration LeaseLimits::Used(Client& client, absl::Time now) {
  while (!client.grants.empty() && client.grants.front().to <= now - kWindow) {
    client.grants.pop_front();
  }
  absl::Duration used;
  for (const Grant& g : client.grants) used += g.to - std::max(g.from, now - kWindow);
  return used;
}

absl::Status LeaseLimits::Admit(const std::string& client, absl::Duration length, absl::Time now) {
  Client& c = clients_[client];
  if (c.live > kMaxWaiting) {
    return absl::ResourceExhaustedError(absl::StrCat("client '", client, "' holds or waits for ",
                                                     c.live, " leases already: one held and ",
                                                     kMaxWaiting,
                                                     " waiting at most, so that no client's "
                                                     "leases queue ahead of another's"));
  }
  if (absl::Status fits = CheckBudget(client, length, now); !fits.ok()) {
    if (c.live == 0 && c.grants.empty()) clients_.erase(client);
    return fits;
  }
  ++c.live;
  return absl::OkStatus();
}

absl::Status LeaseLimits::CheckBudget(const std::string& client, absl::Duration length,
                                      absl::Time now) {
  Client& c = clients_[client];
  const absl::Duration used = Used(c, now);
  if (used + length <= budget_) return absl::OkStatus();
  // When enough of the oldest grants have left the window for this one to fit.
  absl::Duration over = used + length - budget_;
  absl::Time room = now;
  for (const Grant& g : c.grants) {
    const absl::Time from = std::max(g.from, now - kWindow);
    const absl::Duration counted = g.to - from;
    room = from + std::min(counted, over) + kWindow;
    if (counted >= over) break;
    over -= counted;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "client '", client, "' was granted leases for ", absl::FormatDuration(used),
      " of the last hour, and this one's ", absl::FormatDuration(length), " would pass its ",
      absl::FormatDuration(budget_), " an hour (kprofd --lease-budget)",
      length <= budget_ ? absl::StrCat(": ask again after ", When(room)) : std::string()));
}

void LeaseLimits::Granted(const std::string& client, uint64_t ticket, absl::Time now,
                          absl::Duration length) {
  clients_[client].grants.push_back({ticket, now, now + length});
}

void LeaseLimits::Ended(const std::string& client, uint64_t ticket, absl::Time now) {
  const auto found = clients_.find(client);
  if (found == clients_.end()) return;
  Client& c = found->second;
  c.live = std::max(c.live - 1, 0);
  for (Grant& g : c.grants) {
    if (g.ticket == ticket) g.to = std::min(g.to, now);
  }
  (void)Used(c, now);
  if (c.live == 0 && c.grants.empty()) clients_.erase(found);
}

}  // namespace kprof::server

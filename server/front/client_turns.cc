#include "server/front/client_turns.h"

#include <algorithm>

namespace kprof::server {

uint64_t ClientTurns::StrideOf(const std::string& client) const {
  const int weight = weight_of_ ? std::clamp(weight_of_(client), 1, kMaxWeight) : 1;
  return kStride / static_cast<uint64_t>(weight);
}

bool ClientTurns::HasClass(const std::string& client, bool interactive) const {
  const auto q = queues_.find(client);
  return q != queues_.end() &&
         std::any_of(q->second.begin(), q->second.end(),
                     [interactive](const Entry& e) { return e.interactive == interactive; });
}

void ClientTurns::Add(const std::string& client, uint64_t job_id, bool bounded, bool interactive) {
  if (!HasClass(client, interactive)) {
    // Idle time earns nothing: it joins where the clients of its class served last are.
    uint64_t& pass = pass_[interactive][client];
    pass = std::max(pass, virtual_time_[interactive]);
  }
  std::deque<Entry>& queue = queues_[client];
  if (queue.empty()) turns_.push_back(client);
  const auto at = std::find_if(queue.begin(), queue.end(),
                               [job_id](const Entry& queued) { return queued.job_id > job_id; });
  queue.insert(at, Entry{job_id, bounded, interactive});
  interactive_ += interactive ? 1 : 0;
  ++size_;
}

std::optional<ClientTurns::Next> ClientTurns::TakeNext(const std::string& after) {
  if (size_ == 0) return std::nullopt;
  // The class served: interactive first, unless batch jobs have waited through a streak.
  const bool batch_waiting = interactive_ < size_;
  const bool interactive = interactive_ > 0 && (!batch_waiting || streak_ < kInteractiveStreak);
  // The client of the lowest pass with a job of that class; on a tie the earlier in turn, the
  // client just served last.
  std::map<std::string, uint64_t>& passes = pass_[interactive];
  auto chosen = turns_.end();
  for (auto it = turns_.begin(); it != turns_.end(); ++it) {
    if (!HasClass(*it, interactive)) continue;
    if (chosen == turns_.end()) {
      chosen = it;
      continue;
    }
    const uint64_t mine = passes[*it], best = passes[*chosen];
    if (mine < best || (mine == best && *chosen == after && *it != after)) chosen = it;
  }
  Next next{*chosen, 0};
  turns_.erase(chosen);
  std::deque<Entry>& queue = queues_.at(next.client);
  const auto entry = std::find_if(queue.begin(), queue.end(), [interactive](const Entry& e) {
    return e.interactive == interactive;
  });
  next.job_id = entry->job_id;
  queue.erase(entry);
  --size_;
  if (interactive) {
    --interactive_;
    streak_ = batch_waiting ? streak_ + 1 : 0;
  } else {
    streak_ = 0;
  }
  uint64_t& pass = passes[next.client];
  virtual_time_[interactive] = pass;
  pass += StrideOf(next.client);
  if (queue.empty()) {
    queues_.erase(next.client);
  } else {
    turns_.push_back(next.client);  // after the others, on a tie
  }
  return next;
}

std::optional<ClientTurns::Next> ClientTurns::TakeNextOf(const std::string& client) {
  const auto q = queues_.find(client);
  if (q == queues_.end()) return std::nullopt;
  std::deque<Entry>& queue = q->second;
  auto entry =
      std::find_if(queue.begin(), queue.end(), [](const Entry& e) { return e.interactive; });
  if (entry == queue.end()) entry = queue.begin();
  const Next next{client, entry->job_id};
  Remove(next.job_id);
  return next;
}

std::optional<std::string> ClientTurns::Remove(uint64_t job_id) {
  for (auto q = queues_.begin(); q != queues_.end(); ++q) {
    std::deque<Entry>& queue = q->second;
    const auto it = std::find_if(queue.begin(), queue.end(),
                                 [job_id](const Entry& entry) { return entry.job_id == job_id; });
    if (it == queue.end()) continue;
    std::string client = q->first;
    interactive_ -= it->interactive ? 1 : 0;
    queue.erase(it);
    --size_;
    if (queue.empty()) {
      turns_.erase(std::find(turns_.begin(), turns_.end(), client));
      queues_.erase(q);
    }
    return client;
  }
  return std::nullopt;
}

std::vector<ClientTurns::Next> ClientTurns::TakeAll() {
  std::vector<Next> all;
  all.reserve(static_cast<size_t>(size_));
  while (std::optional<Next> next = TakeNext("")) all.push_back(*std::move(next));
  return all;
}

bool ClientTurns::OthersWaiting(const std::string& client) const {
  return std::any_of(turns_.begin(), turns_.end(),
                     [&client](const std::string& c) { return c != client; });
}

int ClientTurns::Queued(const std::string& client) const {
  const auto q = queues_.find(client);
  return q == queues_.end() ? 0 : static_cast<int>(q->second.size());
}

int ClientTurns::Bounded(const std::string& client) const {
  const auto q = queues_.find(client);
  if (q == queues_.end()) return 0;
  return static_cast<int>(std::count_if(q->second.begin(), q->second.end(),
                                        [](const Entry& entry) { return entry.bounded; }));
}

std::map<std::string, int> ClientTurns::QueuedByClient() const {
  std::map<std::string, int> queued;
  for (const auto& [client, queue] : queues_) queued[client] = static_cast<int>(queue.size());
  return queued;
}

}  // namespace kprof::server

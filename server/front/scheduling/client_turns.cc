#include "server/front/scheduling/client_turns.h"

#include <algorithm>

namespace kprof::server {

uint64_t ClientTurns::StrideOf(const std::string& client) const {
  const int weight = weight_of_ ? std::clamp(weight_of_(client), 1, kMaxWeight) : 1;
  return kStride / static_cast<uint64_t>(weight);
}

std::deque<ClientTurns::Entry>::iterator ClientTurns::NextOf(std::deque<Entry>& queue, int streak) {
  const auto interactive =
      std::find_if(queue.begin(), queue.end(), [](const Entry& e) { return e.interactive; });
  if (interactive == queue.end()) return queue.begin();
  const auto batch =
      std::find_if(queue.begin(), queue.end(), [](const Entry& e) { return !e.interactive; });
  return batch != queue.end() && streak >= kInteractiveStreak ? batch : interactive;
}

void ClientTurns::Add(const std::string& client, uint64_t job_id, bool bounded, bool interactive) {
  std::deque<Entry>& queue = queues_[client];
  if (queue.empty()) {
    // Idle time earns nothing: it joins where the clients served last are.
    uint64_t& pass = pass_[client];
    pass = std::max(pass, virtual_time_);
    turns_.push_back(client);
  }
  const auto at = std::find_if(queue.begin(), queue.end(),
                               [job_id](const Entry& queued) { return queued.job_id > job_id; });
  queue.insert(at, Entry{job_id, bounded, interactive});
  ++size_;
}

std::optional<ClientTurns::Next> ClientTurns::TakeNext(const std::string& after) {
  if (size_ == 0) return std::nullopt;
  // The client of the lowest pass; on a tie the earlier in turn, the client just served last.
  auto chosen = turns_.begin();
  for (auto it = std::next(turns_.begin()); it != turns_.end(); ++it) {
    const uint64_t mine = pass_[*it], best = pass_[*chosen];
    if (mine < best || (mine == best && *chosen == after && *it != after)) chosen = it;
  }
  Next next{*chosen, 0};
  turns_.erase(chosen);
  std::deque<Entry>& queue = queues_.at(next.client);
  int& streak = streak_[next.client];
  const auto entry = NextOf(queue, streak);
  const bool batch_waited =
      entry->interactive &&
      std::any_of(queue.begin(), queue.end(), [](const Entry& e) { return !e.interactive; });
  streak = batch_waited ? streak + 1 : 0;
  next.job_id = entry->job_id;
  queue.erase(entry);
  --size_;
  uint64_t& pass = pass_[next.client];
  virtual_time_ = pass;
  pass += StrideOf(next.client);
  if (queue.empty()) {
    queues_.erase(next.client);
    streak_.erase(next.client);
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
    queue.erase(it);
    --size_;
    if (queue.empty()) {
      turns_.erase(std::find(turns_.begin(), turns_.end(), client));
      queues_.erase(q);
      streak_.erase(client);
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

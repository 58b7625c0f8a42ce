#include "server/front/client_turns.h"

#include <algorithm>

namespace kprof::server {

void ClientTurns::Add(const std::string& client, uint64_t job_id, bool bounded) {
  std::deque<Entry>& queue = queues_[client];
  if (queue.empty()) turns_.push_back(client);
  const auto at = std::find_if(queue.begin(), queue.end(),
                               [job_id](const Entry& queued) { return queued.job_id > job_id; });
  queue.insert(at, Entry{job_id, bounded});
  ++size_;
}

std::optional<ClientTurns::Next> ClientTurns::TakeNext(const std::string& after) {
  if (turns_.empty()) return std::nullopt;
  if (turns_.size() > 1 && turns_.front() == after) {
    turns_.push_back(std::move(turns_.front()));  // it just had its turn
    turns_.pop_front();
  }
  Next next{std::move(turns_.front()), 0};
  turns_.pop_front();
  const auto q = queues_.find(next.client);
  next.job_id = q->second.front().job_id;
  q->second.pop_front();
  --size_;
  if (q->second.empty()) {
    queues_.erase(q);
  } else {
    turns_.push_back(next.client);  // its next job after every other client's next
  }
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

}  // namespace kprof::server

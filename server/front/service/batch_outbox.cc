#include "server/front/service/batch_outbox.h"

#include <algorithm>

namespace kprof::server {

void BatchOutbox::Count(Update::State state) {
  switch (state) {
    case Update::QUEUED:
      ++progress_.queued;
      break;
    case Update::RUNNING:
      --progress_.queued;
      ++progress_.running;
      break;
    case Update::DONE:
      ++progress_.done;
      break;
    case Update::FAILED:
      ++progress_.failed;
      break;
    default:
      break;
  }
}

void BatchOutbox::Leave(bool was_running) {
  (was_running ? progress_.running : progress_.queued) -= 1;
}

void BatchOutbox::Push(const std::string& id, Update::State state, Update update, absl::Time now) {
  update.set_id(id);
  update.set_state(state);
  kprof::v1::BatchProgress* progress = update.mutable_progress();
  progress->set_queued(progress_.queued);
  progress->set_running(progress_.running);
  progress->set_done(progress_.done);
  progress->set_failed(progress_.failed);
  bytes_ += update.ByteSizeLong();
  if (queued_.empty()) oldest_ = now;
  queued_.push_back(std::move(update));
}

void BatchOutbox::SetUpdatesPerMessage(uint32_t count) {
  per_message_ = std::clamp<size_t>(count, 1, kMaxUpdatesPerMessage);
}

bool BatchOutbox::Hold(bool more_coming, absl::Time now, absl::Time* flush_at) const {
  if (per_message_ < 2 || !more_coming || queued_.size() >= std::min(per_message_, kHeldFor) ||
      bytes_ >= kMaxMessageBytes) {
    return false;
  }
  *flush_at = oldest_ + kHeldAtMost;
  return now < *flush_at;
}

BatchOutbox::Update BatchOutbox::TakeMessage() {
  size_t bytes = queued_.front().ByteSizeLong();
  Update message = std::move(queued_.front());
  queued_.pop_front();
  writing_count_ = 1;
  while (!queued_.empty() && writing_count_ < per_message_) {
    const size_t next = queued_.front().ByteSizeLong();
    if (bytes + next > kMaxMessageBytes) break;
    *message.add_more() = std::move(queued_.front());
    queued_.pop_front();
    bytes += next;
    ++writing_count_;
  }
  writing_bytes_ = bytes;
  return message;
}

void BatchOutbox::Written(bool ok) {
  bytes_ -= writing_bytes_;
  writing_bytes_ = 0;
  writing_count_ = 0;
  if (!ok) {
    queued_.clear();
    bytes_ = 0;
  }
}

}  // namespace kprof::server

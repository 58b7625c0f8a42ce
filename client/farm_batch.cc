#include "client/farm_batch.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/device.h"
#include "base/log.h"
#include "proto/status.h"

namespace kprof::client {
namespace {

// Uploads a farm starts ahead of the jobs that need them, beside the one a job waits for: on
// two CPUs three at once stored 50 KB modules 1.4 to 1.6 times as fast as one.
constexpr size_t kUploadsAhead = 2;
// How far ahead a daemon is kept busy, by the pace of its answers (Answered); the Python farm
// (python/kprof/farm_daemon.py) has the same.
constexpr double kAheadSeconds = 0.05;
constexpr size_t kMaxWindow = 1024;
// How far ahead of the next job to place the uploads ahead look.
constexpr size_t kLookAhead = 256;
// Modules up to this size travel on the batch stream with their first job there
// (BatchRequest.modules), without a call of their own; a message carries at most
// kInlineBytesPerMessage of them.
constexpr size_t kInlineModuleBytes = size_t{4} << 20;
constexpr size_t kInlineBytesPerMessage = size_t{8} << 20;

using kprof::v1::BatchJob;
using kprof::v1::BatchUpdate;

std::string DeviceOf(const BatchJob& job) {
  const std::string& text =
      job.has_profile_function() ? job.profile_function().device() : job.time_evaluate().device();
  const absl::StatusOr<base::Device> device = base::ParseDevice(text.empty() ? "cpu:0" : text);
  return device.ok() ? base::DeviceSpec(*device) : text;
}

const kprof::v1::FunctionCall& CallOf(const BatchJob& job) {
  return job.has_profile_function() ? job.profile_function().call() : job.time_evaluate().call();
}

const std::string& ReferenceOf(const BatchJob& job) {
  return job.has_profile_function() ? job.profile_function().check().reference().module_id()
                                    : job.time_evaluate().check().reference().module_id();
}

BatchUpdate Failed(const std::string& id, const absl::Status& status) {
  BatchUpdate update;
  update.set_id(id);
  update.set_state(BatchUpdate::FAILED);
  update.set_code(static_cast<int32_t>(status.code()));
  update.set_message(std::string(status.message()));
  return update;
}

}  // namespace

Farm::Batch::Batch(const Farm& farm, const std::vector<BatchJob>& jobs, const OnUpdate& on_update,
                   size_t window, const std::function<void()>& on_pause)
    : modules_(farm.modules_),
      jobs_(jobs),
      on_update_(on_update),
      window_(std::max<size_t>(window, 1)),
      on_pause_(on_pause),
      daemons_(farm.clients_.size()),
      device_of_(jobs.size()) {
  for (size_t i = 0; i < daemons_.size(); ++i) {
    daemons_[i].address = farm.addresses_[i];
    daemons_[i].client = farm.clients_[i].get();
    daemons_[i].window = window_;
  }
}

absl::Status Farm::Batch::Run() {
  if (absl::Status met = Meet(); !met.ok()) return met;
  Queue();
  while (finished_.size() < unique_) {
    TakeFinishedUploads();
    Place();
    if (finished_.size() >= unique_) break;
    if (on_pause_) on_pause_();
    Receive();
  }
  if (on_pause_) on_pause_();
  Close();
  return absl::OkStatus();
}

absl::Status Farm::Batch::Meet() {
  for (Daemon& d : daemons_) {
    absl::StatusOr<kprof::v1::GetInfoResponse> info = d.client->Info();
    if (!info.ok()) {
      unreachable_.push_back(absl::StrCat(d.address, ": ", info.status().message()));
      continue;
    }
    for (const auto& device : info->devices()) d.devices.insert(device.device());
    d.job_timeout = info->limits().job_timeout_seconds();
    d.alive = true;
  }
  if (unreachable_.size() == daemons_.size()) {
    return absl::UnavailableError(
        absl::StrCat("no daemon answered: ", absl::StrJoin(unreachable_, "; ")));
  }
  return absl::OkStatus();
}

void Farm::Batch::Queue() {
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const std::string& id = jobs_[j].id();
    if (id.empty() || id.size() > 256 || !index_of_.emplace(id, j).second) {
      on_update_(
          Failed(id, absl::InvalidArgumentError(absl::StrCat(
                         "job id '", id.substr(0, 300),
                         "' is empty, over 256 bytes, or used twice (ids must be unique)"))));
      continue;
    }
    ++unique_;
    device_of_[j] = DeviceOf(jobs_[j]);
    pending_.push_back(j);
  }
}

void Farm::Batch::Open(size_t i) {
  Daemon& d = daemons_[i];
  d.batch = d.client->OpenBatch();
  d.reader = std::thread([this, &d, i] {
    BatchUpdate message;
    while (d.batch->stream->Read(&message)) {
      std::vector<BatchUpdate> updates = Unpack(std::move(message));
      message = BatchUpdate();
      std::lock_guard<std::mutex> lock(mutex_);
      for (BatchUpdate& update : updates) events_.push_back(Event{i, false, std::move(update)});
      wake_.notify_one();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(Event{i, true, {}});
    wake_.notify_one();
  });
}

void Farm::Batch::Lose(size_t i, const std::string& why) {
  Daemon& d = daemons_[i];
  if (!d.alive) return;
  d.alive = false;
  if (d.batch != nullptr) d.batch->context.TryCancel();
  for (size_t j : d.holding) {
    running_.erase(j);
    if (finished_.count(jobs_[j].id()) == 0) pending_.push_front(j);
  }
  d.holding.clear();
  unreachable_.push_back(absl::StrCat(d.address, ": ", why));
}

void Farm::Batch::Deliver(const BatchUpdate& update) {
  if (finished_.insert(update.id()).second) on_update_(update);
}

size_t Farm::Batch::LeastLoaded(const std::string& device, bool within_window) const {
  size_t best = daemons_.size();
  for (size_t i = 0; i < daemons_.size(); ++i) {
    const Daemon& d = daemons_[i];
    if (!d.alive || d.draining || d.devices.count(device) == 0 ||
        (within_window && d.holding.size() >= d.window)) {
      continue;
    }
    if (best == daemons_.size() || d.holding.size() < daemons_[best].holding.size()) best = i;
  }
  return best;
}

size_t Farm::Batch::LikelyDaemon(size_t j) const {
  return LeastLoaded(device_of_[j], /*within_window=*/false);
}

void Farm::Batch::Answered(Daemon& d) {
  ++d.answers;
  if (!d.first_sent || d.answers < 8) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - *d.first_sent).count();
  const double pace = static_cast<double>(d.answers) / std::max(seconds, 1e-6);
  d.window = std::min(kMaxWindow, std::max(window_, static_cast<size_t>(pace * kAheadSeconds)));
}

void Farm::Batch::UploadAhead() {
  size_t looked = 0;
  for (const size_t j : pending_) {
    if (uploading_.size() >= kUploadsAhead || ++looked > kLookAhead) return;
    const std::string& module = CallOf(jobs_[j]).module_id();
    const auto m = modules_.find(module);
    const size_t i = LikelyDaemon(j);
    if (m == modules_.end() || i == daemons_.size() || daemons_[i].uploaded.count(module) > 0 ||
        daemons_[i].refused.count(module) > 0 || uploading_.count({i, module}) > 0) {
      continue;
    }
    if (m->second.bytes.size() <= kInlineModuleBytes) continue;  // goes with its job
    Client* client = daemons_[i].client;
    const Module* bytes = &m->second;
    uploading_.emplace(
        std::make_pair(i, module), std::async(std::launch::async, [client, bytes] {
          return client->LoadModule(bytes->bytes, bytes->name, bytes->format).status();
        }));
  }
}

absl::Status Farm::Batch::Upload(size_t i, const std::string& module) {
  if (const auto it = uploading_.find({i, module}); it != uploading_.end()) {
    absl::Status status = it->second.get();
    uploading_.erase(it);
    return status;
  }
  const Module& m = modules_.at(module);
  return daemons_[i].client->LoadModule(m.bytes, m.name, m.format).status();
}

// A module a daemon now holds is not sent again, one it refused is refused for each of its jobs
// there (one lost to a daemon's failure is tried again when a job needs it).
void Farm::Batch::TakeFinishedUploads() {
  for (auto it = uploading_.begin(); it != uploading_.end();) {
    if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    const absl::Status status = it->second.get();
    Daemon& d = daemons_[it->first.first];
    if (status.ok()) {
      d.uploaded.insert(it->first.second);
    } else if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
      d.refused.emplace(it->first.second, status);
    }
    it = uploading_.erase(it);
  }
}

void Farm::Batch::Flush() {
  std::map<size_t, kprof::v1::BatchRequest> sending;
  sending.swap(outgoing_);
  inline_bytes_.clear();
  for (auto& [i, message] : sending) {
    if (daemons_[i].alive && !daemons_[i].batch->stream->Write(message)) {
      Lose(i, "its stream closed");
    }
  }
}

// Once every device of the live daemons is full the rest wait, unread: a batch of many thousand
// jobs costs each update the jobs it lets go out, not a pass over all those still waiting.
void Farm::Batch::Place() {
  std::set<std::string> devices, full;
  for (const Daemon& d : daemons_) {
    if (d.alive && !d.draining) devices.insert(d.devices.begin(), d.devices.end());
  }
  // Something may still fit: a device not yet found full, on a daemon below its window (a
  // daemon's window counts the jobs of all its devices).
  const auto room = [&] {
    if (devices.empty()) return true;
    if (full.size() >= devices.size()) return false;
    return std::any_of(daemons_.begin(), daemons_.end(), [&](const Daemon& d) {
      return d.alive && !d.draining && d.holding.size() < d.window;
    });
  };
  std::deque<size_t> unplaced;
  while (!pending_.empty() && room()) {
    const size_t j = pending_.front();
    pending_.pop_front();
    const BatchJob& job = jobs_[j];
    const std::string& device = device_of_[j];
    if (full.count(device) > 0) {
      unplaced.push_back(j);
      continue;
    }
    if (LikelyDaemon(j) == daemons_.size()) {
      std::set<std::string> have;
      for (const Daemon& d : daemons_) {
        if (d.alive) have.insert(d.devices.begin(), d.devices.end());
      }
      Deliver(
          Failed(job.id(),
                 absl::UnavailableError(absl::StrCat(
                     "no live daemon has ", device, " (they have: ", absl::StrJoin(have, ", "), ")",
                     unreachable_.empty() ? "" : "; lost: ", absl::StrJoin(unreachable_, "; ")))));
      continue;
    }
    const size_t best = LeastLoaded(device, /*within_window=*/true);
    if (best == daemons_.size()) {
      full.insert(device);  // every daemon with the device is full
      unplaced.push_back(j);
      continue;
    }
    switch (SendModules(j, best)) {
      case ModuleSent::kThere:
        break;
      case ModuleSent::kPlaceAgain:
        pending_.push_front(j);
        continue;
      case ModuleSent::kHandled:
        continue;
    }
    Daemon& d = daemons_[best];
    if (d.batch == nullptr) Open(best);
    kprof::v1::BatchRequest& message = outgoing_[best];
    message.set_updates_per_message(kUpdatesPerMessage);
    *message.add_jobs() = job;
    d.holding.insert(j);
    if (!d.first_sent) d.first_sent = std::chrono::steady_clock::now();
  }
  // The ones that did not fit go first again, before those not looked at. A daemon lost in
  // the writes below puts its jobs back in front of them all.
  for (auto j = unplaced.rbegin(); j != unplaced.rend(); ++j) pending_.push_front(*j);
  Flush();
}

Farm::Batch::ModuleSent Farm::Batch::SendModules(size_t j, size_t best) {
  // The job's module, and the reference its check runs.
  for (const std::string* module : {&CallOf(jobs_[j]).module_id(), &ReferenceOf(jobs_[j])}) {
    if (module->empty()) continue;
    const ModuleSent sent = SendModule(j, best, *module);
    if (sent != ModuleSent::kThere) return sent;
  }
  return ModuleSent::kThere;
}

Farm::Batch::ModuleSent Farm::Batch::SendModule(size_t j, size_t best, const std::string& module) {
  Daemon& d = daemons_[best];
  // Where this farm has its bytes and the daemon has not had them yet.
  const auto m = modules_.find(module);
  if (m == modules_.end() || d.uploaded.count(module) > 0) return ModuleSent::kThere;
  if (d.refused.count(module) == 0 && m->second.bytes.size() <= kInlineModuleBytes) {
    // With the job, on the stream: stored before the job is taken. One the daemon refuses
    // fails the job as unknown, and the upload below says why.
    if (inline_bytes_[best] + m->second.bytes.size() > kInlineBytesPerMessage) Flush();
    if (!d.alive) return ModuleSent::kPlaceAgain;
    kprof::v1::InlineModule* sent = outgoing_[best].add_modules();
    sent->mutable_header()->set_name(m->second.name);
    sent->mutable_header()->set_format(m->second.format);
    sent->mutable_header()->set_size_bytes(m->second.bytes.size());
    sent->mutable_header()->set_sha256(module);
    sent->set_bytes(m->second.bytes);
    inline_bytes_[best] += m->second.bytes.size();
    d.uploaded.insert(module);
    return ModuleSent::kThere;
  }
  // The jobs placed so far go first, to be measured while this module uploads.
  Flush();
  if (!d.alive) return ModuleSent::kPlaceAgain;  // lost in that write
  // A module the daemon refused is not sent again for each of its jobs.
  const auto refused = d.refused.find(module);
  absl::Status loaded;
  if (refused != d.refused.end()) {
    loaded = refused->second;
  } else {
    UploadAhead();
    loaded = Upload(best, module);
  }
  if (loaded.ok()) {
    d.uploaded.insert(module);
    return ModuleSent::kThere;
  }
  if (absl::IsUnavailable(loaded) || absl::IsDeadlineExceeded(loaded)) {
    pending_.push_front(j);
    Lose(best, std::string(loaded.message()));
    return ModuleSent::kHandled;
  }
  d.refused.emplace(module, loaded);
  Deliver(Failed(jobs_[j].id(), loaded));  // the module itself is refused
  return ModuleSent::kHandled;
}

void Farm::Batch::Receive() {
  SteadyTime until = SteadyTime::max();
  for (const auto& [j, running] : running_) until = std::min(until, DeadlineOf(running));
  std::deque<Event> arrived;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto ready = [&] { return !events_.empty(); };
    if (until == SteadyTime::max()) {
      wake_.wait(lock, ready);
    } else {
      wake_.wait_until(lock, until, ready);
    }
    arrived.swap(events_);
  }
  for (Event& e : arrived) Handle(e);
  LoseTheSilent();
}

Farm::Batch::SteadyTime Farm::Batch::DeadlineOf(const Running& running) const {
  const double limit = daemons_[running.daemon].job_timeout;
  if (limit <= 0) return SteadyTime::max();
  return running.since + std::chrono::duration_cast<SteadyTime::duration>(
                             std::chrono::duration<double>(6 * limit + 2));
}

void Farm::Batch::LoseTheSilent() {
  const SteadyTime now = std::chrono::steady_clock::now();
  for (auto it = running_.begin(); it != running_.end();) {
    const auto [j, running] = *it++;
    if (DeadlineOf(running) > now) continue;
    const Daemon& d = daemons_[running.daemon];
    // Lose erases the daemon's entries, this one's too: the loop goes on from the next.
    Lose(
        running.daemon,
        absl::StrFormat("it said job '%s' was running %.1f s ago and has not answered since "
                        "(its jobs may run %.1f s)",
                        absl::CHexEscape(jobs_[j].id().substr(0, 64)),
                        std::chrono::duration<double>(now - running.since).count(), d.job_timeout));
    it = running_.upper_bound(j);
  }
}

void Farm::Batch::Handle(Event& e) {
  Daemon& d = daemons_[e.daemon];
  if (e.ended) {
    if (d.alive && !d.closing) {
      // Its reader is done with the stream and this thread alone writes to it: the daemon's
      // reason is there to read.
      d.finished = true;
      const absl::Status why = FromGrpcStatus(d.batch->stream->Finish());
      Lose(e.daemon, why.ok()
                         ? std::string("its stream ended")
                         : absl::StrCat("its stream ended: ", absl::StatusCodeToString(why.code()),
                                        ": ", why.message()));
    }
    return;
  }
  // Of several daemons, the caller is told which answered.
  if (daemons_.size() > 1) e.update.set_daemon(d.address);
  const BatchUpdate& u = e.update;
  const auto found = index_of_.find(u.id());
  if (found == index_of_.end()) {
    // No job of this batch: never handed on (nor counted as one answered). Said once a daemon.
    if (d.strays++ == 0) {
      base::Log(
          base::LogSeverity::kWarning,
          absl::StrCat(d.address, " sent an update for '", absl::CHexEscape(u.id().substr(0, 64)),
                       "', which is no job of this batch: ignored (and any more like it)"));
    }
    return;
  }
  const bool final = u.state() == BatchUpdate::DONE || u.state() == BatchUpdate::FAILED;
  const size_t j = d.holding.count(found->second) > 0 ? found->second : jobs_.size();
  if (!final) {
    if (j < jobs_.size() && u.state() == BatchUpdate::RUNNING) {
      running_[j] = Running{e.daemon, std::chrono::steady_clock::now()};
    }
    if (j < jobs_.size() && finished_.count(u.id()) == 0) on_update_(u);
    return;
  }
  if (j < jobs_.size()) {
    d.holding.erase(j);
    running_.erase(j);
    Answered(d);
  }
  if (u.state() == BatchUpdate::FAILED) {
    // From a daemon already given up on: the job was sent elsewhere.
    if (j == jobs_.size()) return;
    // A daemon shutting down refuses what it has not started: another one runs it, and this
    // one gets no more.
    const absl::Status failed = StatusOf(u);
    if (absl::IsUnavailable(failed)) {
      d.draining = true;
      pending_.push_back(j);
      return;
    }
    // A module the daemon evicted since this farm uploaded it: upload it again, and send the
    // job again (the daemon takes its id again after such a refusal).
    if (const std::string module = wire::MissingModule(failed);
        !module.empty() && modules_.count(module) > 0 && reuploads_[j]++ < kMaxResends) {
      d.uploaded.erase(module);
      pending_.push_back(j);
      return;
    }
  }
  Deliver(u);
}

void Farm::Batch::Close() {
  for (Daemon& d : daemons_) {
    if (d.batch == nullptr) continue;
    if (d.alive) {
      d.closing = true;
      d.batch->stream->WritesDone();
    }
    if (d.reader.joinable()) d.reader.join();
    if (!d.finished) (void)d.batch->stream->Finish();
  }
}

}  // namespace kprof::client

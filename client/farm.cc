#include "client/farm.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/device.h"
#include "base/read_file.h"
#include "proto/status.h"

namespace kprof::client {
namespace {

// Uploads a farm starts ahead of the jobs that need them, beside the one a job waits for: on
// two CPUs three at once stored 50 KB modules 1.4 to 1.6 times as fast as one.
constexpr size_t kUploadsAhead = 2;
// How far ahead of the next job to place the uploads ahead look.
constexpr size_t kLookAhead = 256;
// Modules up to this size travel on the batch stream with their first job there
// (BatchRequest.modules), without a call of their own; a message carries at most
// kInlineBytesPerMessage of them.
constexpr size_t kInlineModuleBytes = size_t{4} << 20;
constexpr size_t kInlineBytesPerMessage = size_t{8} << 20;

using kprof::v1::BatchJob;
using kprof::v1::BatchUpdate;

}  // namespace

absl::StatusOr<std::unique_ptr<Farm>> Farm::Connect(const std::string& target,
                                                    const ClientOptions& options) {
  absl::StatusOr<std::vector<std::string>> addresses = ResolveTarget(target);
  if (!addresses.ok()) return addresses.status();
  std::vector<std::unique_ptr<Client>> clients;
  ClientOptions checked = options;
  checked.health_check = true;
  for (const std::string& address : *addresses) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(address, checked);
    if (!client.ok()) return client.status();
    clients.push_back(*std::move(client));
  }
  return std::unique_ptr<Farm>(new Farm(*std::move(addresses), std::move(clients)));
}

std::string Farm::AddModule(std::string bytes, const std::string& name, const std::string& format) {
  std::string id = ModuleId(bytes);
  modules_.emplace(id, Module{std::move(bytes), name, format});
  return id;
}

absl::StatusOr<std::string> Farm::AddModuleFile(const std::string& path,
                                                const std::string& format) {
  absl::StatusOr<std::string> bytes = base::ReadFile(path, "module file");
  if (!bytes.ok()) return bytes.status();
  return AddModule(*std::move(bytes), path.substr(path.rfind('/') + 1), format);
}

namespace {

// One daemon during a batch: its stream, the jobs it holds, and its reader thread.
struct Daemon {
  std::string address;
  Client* client = nullptr;
  std::set<std::string> devices;                // "cpu:0", "cuda:1"
  std::set<std::string> uploaded;               // module ids it holds
  std::map<std::string, absl::Status> refused;  // module ids whose upload it refused, and why
  std::unique_ptr<Client::BatchStream> batch;
  std::thread reader;
  std::set<size_t> holding;  // jobs sent, not yet finished
  bool alive = false;
  bool closing = false;
  bool draining = false;  // it refused a job as shutting down: no new ones
};

// What reader threads hand to the dispatching thread.
struct Event {
  size_t daemon = 0;
  bool ended = false;  // the stream has no more updates
  BatchUpdate update;
};

std::string DeviceOf(const BatchJob& job) {
  const std::string& text =
      job.has_profile_function() ? job.profile_function().device() : job.time_evaluate().device();
  const absl::StatusOr<base::Device> device = base::ParseDevice(text.empty() ? "cpu:0" : text);
  return device.ok() ? base::DeviceSpec(*device) : text;
}

const kprof::v1::FunctionCall& CallOf(const BatchJob& job) {
  return job.has_profile_function() ? job.profile_function().call() : job.time_evaluate().call();
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

absl::Status Farm::MeasureBatch(const std::vector<BatchJob>& jobs,
                                const std::function<void(const BatchUpdate&)>& on_update,
                                size_t window, const std::function<void()>& on_pause) {
  window = std::max<size_t>(window, 1);
  std::vector<Daemon> daemons(clients_.size());
  std::vector<std::string> unreachable;
  for (size_t i = 0; i < clients_.size(); ++i) {
    daemons[i].address = addresses_[i];
    daemons[i].client = clients_[i].get();
    absl::StatusOr<kprof::v1::GetInfoResponse> info = clients_[i]->Info();
    if (!info.ok()) {
      unreachable.push_back(absl::StrCat(addresses_[i], ": ", info.status().message()));
      continue;
    }
    for (const auto& d : info->devices()) daemons[i].devices.insert(d.device());
    daemons[i].alive = true;
  }
  if (unreachable.size() == daemons.size()) {
    return absl::UnavailableError(
        absl::StrCat("no daemon answered: ", absl::StrJoin(unreachable, "; ")));
  }

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Event> events;  // guarded by mutex
  const auto open = [&](size_t i) {
    Daemon& d = daemons[i];
    d.batch = d.client->OpenBatch();
    d.reader = std::thread([&mutex, &wake, &events, &d, i] {
      BatchUpdate message;
      while (d.batch->stream->Read(&message)) {
        std::vector<BatchUpdate> updates = Unpack(std::move(message));
        message = BatchUpdate();
        std::lock_guard<std::mutex> lock(mutex);
        for (BatchUpdate& update : updates) events.push_back(Event{i, false, std::move(update)});
        wake.notify_one();
      }
      std::lock_guard<std::mutex> lock(mutex);
      events.push_back(Event{i, true, {}});
      wake.notify_one();
    });
  };

  std::deque<size_t> pending;
  std::map<size_t, int> reuploads;  // by job
  std::set<std::string> finished;
  std::unordered_map<std::string_view, size_t> index_of;  // by id, of the jobs that run
  std::vector<std::string> device_of(jobs.size());        // each job's, read once
  size_t unique = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].id().empty() || jobs[j].id().size() > 256 ||
        !index_of.emplace(jobs[j].id(), j).second) {
      on_update(Failed(jobs[j].id(), absl::InvalidArgumentError(absl::StrCat(
                                         "job id '", jobs[j].id().substr(0, 300),
                                         "' is empty, over 256 bytes, or used twice (ids must "
                                         "be unique)"))));
      continue;
    }
    ++unique;
    device_of[j] = DeviceOf(jobs[j]);
    pending.push_back(j);
  }
  const auto deliver = [&](const BatchUpdate& update) {
    if (finished.insert(update.id()).second) on_update(update);
  };
  // A daemon that failed: its stream is finished, and its jobs go back to the queue.
  const auto lose = [&](size_t i, const std::string& why) {
    Daemon& d = daemons[i];
    if (!d.alive) return;
    d.alive = false;
    if (d.batch != nullptr) d.batch->context.TryCancel();
    for (size_t j : d.holding) {
      if (finished.count(jobs[j].id()) == 0) pending.push_front(j);
    }
    d.holding.clear();
    unreachable.push_back(absl::StrCat(d.address, ": ", why));
  };

  // Uploads started ahead of their jobs' placement, by daemon and module: while one module
  // uploads (most of it waiting on the daemon's store), the next ones do too, and the jobs
  // placed before them are measured meanwhile.
  std::map<std::pair<size_t, std::string>, std::future<absl::Status>> uploading;
  // The daemon a job would go to were it placed now (the least loaded live one with its
  // device, room or not), or daemons.size().
  // The least loaded live daemon with `device` holding fewer than `room` jobs, or
  // daemons.size().
  const auto least_loaded = [&](const std::string& device, size_t room) {
    size_t best = daemons.size();
    for (size_t i = 0; i < daemons.size(); ++i) {
      const Daemon& d = daemons[i];
      if (!d.alive || d.draining || d.devices.count(device) == 0 || d.holding.size() >= room) {
        continue;
      }
      if (best == daemons.size() || d.holding.size() < daemons[best].holding.size()) best = i;
    }
    return best;
  };
  const auto likely_daemon = [&](size_t j) {
    return least_loaded(device_of[j], std::numeric_limits<size_t>::max());
  };
  // Starts the uploads the next pending jobs will need, up to kUploadsAhead at once, looking at
  // most kLookAhead jobs ahead.
  const auto upload_ahead = [&] {
    size_t looked = 0;
    for (const size_t j : pending) {
      if (uploading.size() >= kUploadsAhead || ++looked > kLookAhead) return;
      const std::string& module = CallOf(jobs[j]).module_id();
      const auto m = modules_.find(module);
      const size_t i = likely_daemon(j);
      if (m == modules_.end() || i == daemons.size() || daemons[i].uploaded.count(module) > 0 ||
          daemons[i].refused.count(module) > 0 || uploading.count({i, module}) > 0) {
        continue;
      }
      if (m->second.bytes.size() <= kInlineModuleBytes) continue;  // goes with its job
      Client* client = daemons[i].client;
      const Module* bytes = &m->second;
      uploading.emplace(
          std::make_pair(i, module), std::async(std::launch::async, [client, bytes] {
            return client->LoadModule(bytes->bytes, bytes->name, bytes->format).status();
          }));
    }
  };
  // The upload of `module` to daemon `i`: the one started ahead (waited for), or one now.
  const auto upload = [&](size_t i, const std::string& module) -> absl::Status {
    if (const auto it = uploading.find({i, module}); it != uploading.end()) {
      absl::Status status = it->second.get();
      uploading.erase(it);
      return status;
    }
    const Module& m = modules_.at(module);
    return daemons[i].client->LoadModule(m.bytes, m.name, m.format).status();
  };
  // Uploads ahead that ended, taken in: a module a daemon now holds is not sent again, one it
  // refused is refused for each of its jobs there (one lost to a daemon's failure is tried again
  // when a job needs it).
  const auto finished_uploads = [&] {
    for (auto it = uploading.begin(); it != uploading.end();) {
      if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++it;
        continue;
      }
      const absl::Status status = it->second.get();
      Daemon& d = daemons[it->first.first];
      if (status.ok()) {
        d.uploaded.insert(it->first.second);
      } else if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
        d.refused.emplace(it->first.second, status);
      }
      it = uploading.erase(it);
    }
  };

  // The jobs placed and not sent yet, by daemon: each daemon's go in one message, with the
  // bytes of the modules that travel with them (inline_bytes).
  std::map<size_t, kprof::v1::BatchRequest> outgoing;
  std::map<size_t, size_t> inline_bytes;
  const auto flush = [&] {
    std::map<size_t, kprof::v1::BatchRequest> sending;
    sending.swap(outgoing);
    inline_bytes.clear();
    for (auto& [i, message] : sending) {
      if (daemons[i].alive && !daemons[i].batch->stream->Write(message)) {
        lose(i, "its stream closed");
      }
    }
  };
  while (finished.size() < unique) {
    finished_uploads();
    // Hand out what fits, each job to a live daemon with its device. Once every device of the
    // live daemons is full the rest wait, unread: a batch of many thousand jobs costs each
    // update the jobs it lets go out, not a pass over all those still waiting.
    std::set<std::string> devices, full;
    for (const Daemon& d : daemons) {
      if (d.alive && !d.draining) devices.insert(d.devices.begin(), d.devices.end());
    }
    // Something may still fit: a device not yet found full, on a daemon below its window (a
    // daemon's window counts the jobs of all its devices).
    const auto room = [&] {
      if (devices.empty()) return true;
      if (full.size() >= devices.size()) return false;
      return std::any_of(daemons.begin(), daemons.end(), [&](const Daemon& d) {
        return d.alive && !d.draining && d.holding.size() < window;
      });
    };
    std::deque<size_t> unplaced;
    while (!pending.empty() && room()) {
      const size_t j = pending.front();
      pending.pop_front();
      const BatchJob& job = jobs[j];
      const std::string& device = device_of[j];
      if (full.count(device) > 0) {
        unplaced.push_back(j);
        continue;
      }
      const bool any = likely_daemon(j) != daemons.size();
      const size_t best = least_loaded(device, window);
      if (!any) {
        std::set<std::string> have;
        for (const Daemon& d : daemons) {
          if (d.alive) have.insert(d.devices.begin(), d.devices.end());
        }
        deliver(Failed(job.id(), absl::UnavailableError(absl::StrCat(
                                     "no live daemon has ", device,
                                     " (they have: ", absl::StrJoin(have, ", "), ")"))));
        continue;
      }
      if (best == daemons.size()) {
        full.insert(device);  // every daemon with the device is full
        unplaced.push_back(j);
        continue;
      }
      Daemon& d = daemons[best];
      // The job's module, where this farm has its bytes and the daemon has not had them yet.
      const std::string& module = CallOf(job).module_id();
      if (const auto m = modules_.find(module); m != modules_.end() && !d.uploaded.count(module) &&
                                                !d.refused.count(module) &&
                                                m->second.bytes.size() <= kInlineModuleBytes) {
        // With the job, on the stream: stored before the job is taken. One the daemon refuses
        // fails the job as unknown, and the upload below says why.
        if (inline_bytes[best] + m->second.bytes.size() > kInlineBytesPerMessage) flush();
        if (!d.alive) {
          pending.push_front(j);
          continue;
        }
        kprof::v1::InlineModule* sent = outgoing[best].add_modules();
        sent->mutable_header()->set_name(m->second.name);
        sent->mutable_header()->set_format(m->second.format);
        sent->mutable_header()->set_size_bytes(m->second.bytes.size());
        sent->mutable_header()->set_sha256(module);
        sent->set_bytes(m->second.bytes);
        inline_bytes[best] += m->second.bytes.size();
        d.uploaded.insert(module);
      } else if (m != modules_.end() && !d.uploaded.count(module)) {
        // The jobs placed so far go first, to be measured while this module uploads.
        flush();
        if (!d.alive) {  // lost in that write: the job is placed again
          pending.push_front(j);
          continue;
        }
        // A module the daemon refused is not sent again for each of its jobs.
        const auto refused = d.refused.find(module);
        absl::Status loaded;
        if (refused != d.refused.end()) {
          loaded = refused->second;
        } else {
          upload_ahead();
          loaded = upload(best, module);
        }
        if (!loaded.ok()) {
          if (absl::IsUnavailable(loaded) || absl::IsDeadlineExceeded(loaded)) {
            pending.push_front(j);
            lose(best, std::string(loaded.message()));
          } else {
            d.refused.emplace(module, loaded);
            deliver(Failed(job.id(), loaded));  // the module itself is refused
          }
          continue;
        }
        d.uploaded.insert(module);
      }
      if (d.batch == nullptr) open(best);
      kprof::v1::BatchRequest& message = outgoing[best];
      message.set_updates_per_message(kUpdatesPerMessage);
      *message.add_jobs() = job;
      d.holding.insert(j);
    }
    // The ones that did not fit go first again, before those not looked at. A daemon lost in
    // the writes below puts its jobs back in front of them all.
    for (auto j = unplaced.rbegin(); j != unplaced.rend(); ++j) pending.push_front(*j);
    flush();
    if (finished.size() >= unique) break;

    // Wait for the next update or a stream's end.
    if (on_pause) on_pause();
    std::deque<Event> arrived;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return !events.empty(); });
      arrived.swap(events);
    }
    for (Event& e : arrived) {
      Daemon& d = daemons[e.daemon];
      if (e.ended) {
        if (d.alive && !d.closing) lose(e.daemon, "its stream ended");
        continue;
      }
      const BatchUpdate& u = e.update;
      const bool final = u.state() == BatchUpdate::DONE || u.state() == BatchUpdate::FAILED;
      size_t j = jobs.size();
      if (const auto found = index_of.find(u.id());
          found != index_of.end() && d.holding.count(found->second) > 0) {
        j = found->second;
      }
      if (!final) {
        if (j < jobs.size() && finished.count(u.id()) == 0) on_update(u);
        continue;
      }
      if (j < jobs.size()) d.holding.erase(j);
      if (u.state() == BatchUpdate::FAILED) {
        // From a daemon already given up on: the job was sent elsewhere.
        if (j == jobs.size()) continue;
        // A daemon shutting down refuses what it has not started: another one runs it, and
        // this one gets no more.
        const absl::Status failed = StatusOf(u);
        if (absl::IsUnavailable(failed)) {
          d.draining = true;
          pending.push_back(j);
          continue;
        }
        // A module the daemon evicted since this farm uploaded it: upload it again, and send
        // the job again (the daemon takes its id again after such a refusal).
        if (const std::string module = wire::MissingModule(failed);
            !module.empty() && modules_.count(module) > 0 && reuploads[j]++ < kMaxResends) {
          d.uploaded.erase(module);
          pending.push_back(j);
          continue;
        }
      }
      deliver(u);
    }
  }
  if (on_pause) on_pause();
  // Every job has its answer: close the streams and wait for their readers.
  for (Daemon& d : daemons) {
    if (d.batch == nullptr) continue;
    if (d.alive) {
      d.closing = true;
      d.batch->stream->WritesDone();
    }
    if (d.reader.joinable()) d.reader.join();
    (void)d.batch->stream->Finish();
  }
  return absl::OkStatus();
}

}  // namespace kprof::client

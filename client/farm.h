// Farm: many kprofd daemons as one, for tuners — no central tracker to run or to lose.
//
// A target names the daemons: "host:port", a list "h1:9177,h2:9177" (or "ipv4:10.0.0.1:9177,
// 10.0.0.2:9177", "ipv6:[::1]:9177,..."), or "dns:///kprofd.farm.example:9177", whose every
// address is a daemon (a Kubernetes headless Service). The farm keeps one client (one channel)
// per daemon, learns each daemon's devices from GetInfo, and sends each job only to daemons
// with the device it names, a few at a time per daemon so that no queue grows long. Each
// channel watches its daemon's gRPC health service, so a draining daemon gets nothing new. A
// daemon
// lost mid-batch has its unfinished jobs sent to the others (modules are content-addressed, so
// uploading them there is safe); each job is reported exactly once, by id.
//
//   KPROF_ASSIGN_OR_RETURN(auto farm, Farm::Connect("dns:///kprofd.lab:9177"));
//   KPROF_ASSIGN_OR_RETURN(std::string id, farm->AddModuleFile("candidates/k17.so"));
//   farm->MeasureBatch(jobs, [](const kprof::v1::BatchUpdate& u) { ... });
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/kprof_client.h"

namespace kprof::client {

// The daemons a target names, as "host:port" each; INVALID_ARGUMENT for a malformed target,
// NOT_FOUND when a DNS name resolves to nothing.
absl::StatusOr<std::vector<std::string>> ResolveTarget(const std::string& target);

class Farm {
 public:
  static absl::StatusOr<std::unique_ptr<Farm>> Connect(const std::string& target,
                                                       const ClientOptions& options = {});

  const std::vector<std::string>& daemons() const { return addresses_; }
  Client& client(size_t i) { return *clients_[i]; }

  // Registers a module's bytes and returns its id. It reaches a daemon the first time a job
  // sent there names it.
  std::string AddModule(std::string bytes, const std::string& name,
                        const std::string& format = "auto");
  absl::StatusOr<std::string> AddModuleFile(const std::string& path,
                                            const std::string& format = "auto");

  // Runs `jobs` (ids unique) across the daemons; `on_update` sees every update in this thread,
  // and exactly one DONE or FAILED per job. At most `window` jobs wait or run per daemon: enough
  // to keep a daemon's pipeline full (it hands up to 8 of a stream's jobs to a worker at once),
  // few enough that a daemon lost mid-batch leaves little to send elsewhere — or, once a
  // daemon's answers show its jobs are short, as many as it answers in 50 ms (up to 1024), so
  // that short jobs travel and come back many to a message.
  // Fails only when no daemon answers at all. `on_pause`, when set, runs in this thread each
  // time the updates that arrived together have been seen, before the farm waits for more (a
  // caller that buffers what it writes of them flushes there).
  absl::Status MeasureBatch(const std::vector<kprof::v1::BatchJob>& jobs,
                            const std::function<void(const kprof::v1::BatchUpdate&)>& on_update,
                            size_t window = 32, const std::function<void()>& on_pause = nullptr);

 private:
  Farm(std::vector<std::string> addresses, std::vector<std::unique_ptr<Client>> clients)
      : addresses_(std::move(addresses)), clients_(std::move(clients)) {}

  class Batch;  // one MeasureBatch (farm_batch.h)

  struct Module {
    std::string bytes, name, format;
  };
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::map<std::string, Module> modules_;  // by id
};

}  // namespace kprof::client

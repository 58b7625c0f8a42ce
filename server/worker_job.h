// WorkerJobs: what a worker process does with each request — resolve modules (keeping loaded
// ones open between jobs), run the LocalRunner, and answer with a result or a status.
// gRPC-free: it runs inside kprofd-worker.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "core/modules/shared_library.h"
#include "kprof/v1/worker.pb.h"

namespace kprof::server {

class WorkerJobs {
 public:
  explicit WorkerJobs(core::Device device) : device_(device) {}

  // Runs one job; never fails as a call: errors travel in the response's code and message.
  kprof::worker::v1::WorkerResponse Run(const kprof::worker::v1::WorkerRequest& request);

  size_t modules_open() const { return modules_.size(); }

  // What the job ran, for messages: "function 'f'" or "the profiled sequence".
  static std::string Describe(const kprof::worker::v1::WorkerRequest& request);

 private:
  absl::StatusOr<const core::Module*> ResolveModule(
      const std::string& id, const kprof::worker::v1::WorkerRequest& request);
  absl::Status RunJob(const kprof::worker::v1::WorkerRequest& request,
                      kprof::worker::v1::WorkerResponse* response);

  core::Device device_;
  std::map<std::string, std::unique_ptr<core::SharedLibraryModule>> modules_;
};

}  // namespace kprof::server

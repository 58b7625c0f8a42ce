// WorkerJobs: what a worker process does with each request — resolve modules (keeping loaded
// ones open between jobs), run the LocalRunner, and answer with a result or a status.
// gRPC-free: it runs inside kprofd-worker.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/device.h"
#include "core/measure/local_runner.h"
#include "core/measure/strict_checks.h"
#include "core/modules/module.h"
#include "server/ipc/worker.pb.h"
#include "server/worker/argument_file.h"

namespace kprof::server {

// Modules kept open between jobs: an autotuner sends thousands of candidates, each loaded once
// or twice; the least recently used beyond this many are closed.
inline constexpr size_t kMaxOpenModules = 64;

class WorkerJobs {
 public:
  explicit WorkerJobs(base::Device device, size_t max_open_modules = kMaxOpenModules)
      : device_(device), max_open_modules_(max_open_modules) {}

  // Runs one job; never fails as a call: errors travel in the response's code and message.
  // `module_fds`, when given, are the request's modules in order, opened by the daemon (which
  // the worker's sandbox lets it read where their paths are not); a module not open yet is
  // loaded from its descriptor, else from its path. The descriptors stay the caller's.
  kprof::worker::v1::WorkerResponse Run(const kprof::worker::v1::WorkerRequest& request,
                                        absl::Span<const int> module_fds = {});

  size_t modules_open() const { return modules_.size(); }

  // The memfd of the last answer's arguments (ArgumentData), to send with it, or -1; the
  // caller's to close.
  int TakeArgumentFile() { return std::exchange(argument_fd_, -1); }

  // How this worker is sandboxed, for the host's description.
  void set_isolation(std::string isolation, bool isolated) {
    isolation_ = std::move(isolation);
    isolated_ = isolated;
  }
  bool is_open(const std::string& id) const { return modules_.count(id) > 0; }

  // What the job ran, for messages: "function 'f'" or "the profiled sequence".
  static std::string Describe(const kprof::worker::v1::WorkerRequest& request);

 private:
  absl::StatusOr<const core::Module*> ResolveModule(const std::string& id,
                                                    const kprof::worker::v1::WorkerRequest& request,
                                                    absl::Span<const int> module_fds);
  // A reference's run (ReferenceJob): its arguments after the call, and which it changed.
  // A checked call's hooks (Job::before_checked, Job::checked): its arguments into the file.
  void AddCheckedHooks(core::Job& job, kprof::worker::v1::WorkerResponse* response);
  // The time evaluation's throughput at its `median` call, into the response; a strict job's
  // that is impossible is a finding (ArgumentData.finding) that fails it once its answers pass.
  absl::Status SetThroughput(const kprof::worker::v1::WorkerRequest& request, const core::Job& job,
                             double median, bool strict,
                             kprof::worker::v1::WorkerResponse* response) const;
  // A strict job's options: threads counted without the CUDA driver's, each checked call's
  // arguments appended to the job's file with what it was (ArgumentData.checked).
  core::StrictOptions StrictHooks(kprof::worker::v1::WorkerResponse* response);
  absl::Status RunReference(const kprof::worker::v1::WorkerRequest& request,
                            absl::Span<const int> module_fds,
                            kprof::worker::v1::WorkerResponse* response);
  absl::Status RunJob(const kprof::worker::v1::WorkerRequest& request,
                      absl::Span<const int> module_fds,
                      kprof::worker::v1::WorkerResponse* response);

  // Closes the least recently used modules beyond the limit, except those `request` names.
  void CloseIdleModules(const kprof::worker::v1::WorkerRequest& request);
  // Tells the front, in `response`, which modules are no longer open: those closed since the
  // last answer, and those of `request` that are not open.
  void ReportClosed(const kprof::worker::v1::WorkerRequest& request,
                    kprof::worker::v1::WorkerResponse* response);

  std::string isolation_ = "not sandboxed";
  bool isolated_ = false;

  struct OpenModule {
    std::unique_ptr<core::Module> module;
    uint64_t last_used = 0;
  };
  base::Device device_;
  size_t max_open_modules_;
  uint64_t jobs_ = 0;
  std::map<std::string, OpenModule> modules_;
  std::vector<std::string> closed_;  // since the last answer
  ArgumentFile arguments_;           // the checked calls' arguments, while a job runs
  int argument_fd_ = -1;             // TakeArgumentFile
  // The generation of the host's part of the manifest (core::ReadEnvironment) the front has:
  // an answer carries it only when it changed.
  uint64_t sent_host_generation_ = 0;
};

}  // namespace kprof::server

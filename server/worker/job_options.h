// A job's options from its request, checked. One set of functions for the worker, which runs
// with the options they give, and for the front, which checks a request before it is queued: a
// bad request is refused at once, instead of waiting for the device and waking a worker to be
// refused. gRPC-free (the worker links it).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/device.h"
#include "core/cuda/launch_config.h"
#include "core/measure/local_runner.h"
#include "kprof/v1/kprof.pb.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {

// Durations in milliseconds from the wire are finite and at most an hour: NaN and 1e308 would
// run until the job's timeout.
inline constexpr int64_t kMaxOptionMs = 3'600'000;

// A TimeEvaluateRequest's options as the runner takes them, for `device`. INVALID_ARGUMENT
// naming the field and what is accepted; RESOURCE_EXHAUSTED for a cache flush whose two buffers
// would pass `max_argument_bytes` (0: no limit). `strict`: strictly checked, though the request
// no longer says so (the worker's copy has its check taken out).
absl::StatusOr<core::TimeJob> TimeJobFromRequest(const kprof::v1::TimeEvaluateRequest& request,
                                                 base::Device device, uint64_t max_argument_bytes,
                                                 bool strict = false);

// Where a profile's arguments lie (tensor_alignment, tensor_offset, huge_pages), checked
// against each call's arguments: INVALID_ARGUMENT naming the field and what is accepted.
absl::StatusOr<core::PlacementOptions> ProfilePlacement(
    const kprof::v1::ProfileFunctionRequest& request);
absl::StatusOr<core::PlacementOptions> ProfilePlacement(const kprof::v1::ProfileRequest& request);

// A kernel's launch configuration from the wire: one to three dimensions each, x first, the
// missing ones 1.
absl::StatusOr<core::LaunchConfig> LaunchFromProto(const kprof::v1::LaunchConfig& launch);

// A call's argument specs parsed and its launch configuration read: INVALID_ARGUMENT quoting the
// first that is wrong.
absl::Status CheckCallOptions(const kprof::v1::FunctionCall& call);

// Every check above for the job a worker request holds (time, profile or sequence), on `device`,
// with the request's max_argument_bytes (0: the worker's default). Modules, functions, and what
// needs the device itself (collectors, memory) are checked where the job runs.
absl::Status CheckJobOptions(const kprof::worker::v1::WorkerRequest& request, base::Device device);

// The same for a job of a batch stream, when the stream takes it.
absl::Status CheckBatchJobOptions(const kprof::v1::BatchJob& job, base::Device device,
                                  uint64_t max_argument_bytes);

}  // namespace kprof::server

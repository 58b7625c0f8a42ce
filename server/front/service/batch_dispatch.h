// The batch stream's dispatch rule as a pure function: how many of each device's waiting jobs a
// stream hands to that device's executor now. A stream keeps its jobs in its own queue and
// gives each executor a few at a time, so the shared queue stays short and other clients' jobs
// interleave with a long batch; and it gives none while the results they may bring would take
// what it holds for its client past a bound, so a client that reads slowly stalls its own
// stream, not the daemon's memory.
#pragma once

#include <cstddef>
#include <vector>

namespace kprof::server {

// One device's side of a stream.
struct DeviceBacklog {
  int busy = 0;  // the stream's jobs with the device's executor
  // The guessed result bytes of the device's next waiting jobs, in order; those past what the
  // device can take (`per_device` - `busy`) need not be given.
  std::vector<size_t> next_results;
};

struct DispatchLimits {
  int per_device = 16;                       // jobs with one device's executor at once
  size_t max_held_bytes = size_t{32} << 20;  // updates not yet read and results to come
};

// How many of each device's next jobs go now, devices in the order given: up to `per_device`
// with an executor at once, while `held_bytes` (the updates the client has not read and the
// results of the jobs with executors) and the results the new ones may bring fit
// `max_held_bytes`; past it one at a time (a device with none of the stream's jobs gets one
// whatever its result's size, so a huge result still runs). None while the unread updates
// alone (`unread_bytes`) reach the bound: the write that makes room asks again.
std::vector<size_t> PlanDispatch(const std::vector<DeviceBacklog>& devices, size_t held_bytes,
                                 size_t unread_bytes, const DispatchLimits& limits);

}  // namespace kprof::server

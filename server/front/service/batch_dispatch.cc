#include "server/front/service/batch_dispatch.h"

namespace kprof::server {

std::vector<size_t> PlanDispatch(const std::vector<DeviceBacklog>& devices, size_t held_bytes,
                                 size_t unread_bytes, const DispatchLimits& limits) {
  std::vector<size_t> plan(devices.size(), 0);
  if (unread_bytes >= limits.max_held_bytes) return plan;
  size_t held = held_bytes;
  for (size_t d = 0; d < devices.size(); ++d) {
    const DeviceBacklog& device = devices[d];
    int busy = device.busy;
    for (const size_t result : device.next_results) {
      if (busy >= limits.per_device) break;
      if (busy > 0 && held + result > limits.max_held_bytes) break;
      held += result;
      ++busy;
      ++plan[d];
    }
  }
  return plan;
}

}  // namespace kprof::server

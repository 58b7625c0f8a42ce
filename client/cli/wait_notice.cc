#include "client/cli/wait_notice.h"

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kprof::client {

std::string WaitLine(const kprof::v1::DeviceInfo& device) {
  if (!device.busy() || device.queue_length() == 0) return "";
  std::string line = absl::StrCat("waiting for ", device.device(), ": ");
  if (!device.running_client().empty()) {
    absl::StrAppend(&line, "it has run ", device.running_client(), "'s jobs for ",
                    absl::StrFormat("%.1f s", device.running_seconds()));
  } else {
    absl::StrAppend(&line, "it is busy");
  }
  std::vector<std::string> queued;
  for (const kprof::v1::ClientQueue& q : device.queued()) {
    queued.push_back(absl::StrCat(q.client(), " ", q.jobs()));
  }
  if (!queued.empty()) absl::StrAppend(&line, "; queued: ", absl::StrJoin(queued, ", "));
  return line;
}

WaitNotice::WaitNotice(Client& client, std::string device, absl::Duration first,
                       absl::Duration every)
    : thread_([this, &client, device = std::move(device), first, every] {
        Watch(client, device, first, every);
      }) {}

WaitNotice::~WaitNotice() {
  answered_.Notify();
  thread_.join();
}

void WaitNotice::Watch(Client& client, const std::string& device, absl::Duration first,
                       absl::Duration every) {
  for (absl::Duration wait = first; !answered_.WaitForNotificationWithTimeout(wait); wait = every) {
    // Short: a daemon too busy to answer this has left the call's own deadline to say so.
    const absl::StatusOr<kprof::v1::GetInfoResponse> info = client.Info(absl::Seconds(2));
    if (!info.ok() || answered_.HasBeenNotified()) continue;
    for (const kprof::v1::DeviceInfo& d : info->devices()) {
      const std::string line = d.device() == device ? WaitLine(d) : "";
      if (!line.empty()) std::fprintf(stderr, "kprof: %s\n", line.c_str());
    }
  }
}

}  // namespace kprof::client

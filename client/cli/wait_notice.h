// Waits that show: while a call of the CLI waits for its answer, a line on stderr after a second
// (and again every ten, when it changed) saying what holds the device and who queues for it —
// a job behind another client's long one is not a silent hang.
//
//   WaitNotice notice(*client, "cpu:0");   // starts watching
//   auto answer = client->TimeEvaluate(request, timeout);
//   // ~WaitNotice: stops at once
#pragma once

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/kprof_client.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::client {

// "waiting for cpu:0: it has run alice's jobs for 12.3 s; queued: alice 2, local 1", or "" when
// the device is idle or nothing waits on it (the caller's job is the one running).
std::string WaitLine(const kprof::v1::DeviceInfo& device);

class WaitNotice {
 public:
  WaitNotice(Client& client, std::string device, absl::Duration first = absl::Seconds(1),
             absl::Duration every = absl::Seconds(10));
  ~WaitNotice();
  WaitNotice(const WaitNotice&) = delete;
  WaitNotice& operator=(const WaitNotice&) = delete;

 private:
  void Watch(Client& client, const std::string& device, absl::Duration first, absl::Duration every);

  absl::Notification answered_;
  std::thread thread_;
};

}  // namespace kprof::client

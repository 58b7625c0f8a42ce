// What the lease tests share (lease_*test.cc): a fake sysfs tree of a host's clocks, and the
// fixture of a real kprofd with token clients alice and bob, asking for and releasing leases.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "token_clients.h"

namespace kprof {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

inline void Put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text << "\n";
}

// A host's cpufreq as sysfs shows it: one policy over CPUs 0 and 1, powersave between 800 MHz
// and 4 GHz, base 2.4 GHz, turbo on.
struct FakeSysfs {
  explicit FakeSysfs(const std::string& tree) : root(tree) {
    const std::string policy = root + "/sys/devices/system/cpu/cpufreq/policy0/";
    Put(policy + "affected_cpus", "0 1");
    Put(policy + "scaling_governor", "powersave");
    Put(policy + "scaling_available_governors", "performance powersave");
    Put(policy + "scaling_min_freq", "800000");
    Put(policy + "scaling_max_freq", "4000000");
    Put(policy + "cpuinfo_min_freq", "800000");
    Put(policy + "cpuinfo_max_freq", "4000000");
    Put(policy + "base_frequency", "2400000");
    Put(root + "/sys/devices/system/cpu/intel_pstate/no_turbo", "0");
  }
  std::string Policy(const std::string& file) const {
    return Slurp(root + "/sys/devices/system/cpu/cpufreq/policy0/" + file);
  }
  std::string Turbo() const {
    return Slurp(root + "/sys/devices/system/cpu/intel_pstate/no_turbo");
  }
  void ExpectAsFound() const {
    EXPECT_EQ(Policy("scaling_governor"), "powersave");
    EXPECT_EQ(Policy("scaling_min_freq"), "800000");
    EXPECT_EQ(Policy("scaling_max_freq"), "4000000");
    EXPECT_EQ(Turbo(), "0");
  }
  void ExpectLocked() const {
    EXPECT_EQ(Policy("scaling_governor"), "performance");
    EXPECT_EQ(Policy("scaling_min_freq"), "2400000");
    EXPECT_EQ(Policy("scaling_max_freq"), "2400000");
    EXPECT_EQ(Turbo(), "1");
  }
  std::string root;
};

inline v1::TimeEvaluateRequest Sleep(int us) {
  v1::TimeEvaluateRequest request;
  request.mutable_call()->set_module_id("builtin");
  request.mutable_call()->set_function("sleep_us");
  request.mutable_call()->add_args("float64:" + std::to_string(us));
  request.set_number(1);
  request.set_repeat(1);
  return request;
}

// A lease held from a test: the stream, and what the daemon said.
struct Held {
  std::unique_ptr<client::Client::LeaseStream> lease;
  v1::LeaseUpdate first;  // GRANTED, WAITING or ENDED
};

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/tokens") << "token-a alice\ntoken-b bob\n";
    chmod(dir_.path().c_str(), 0755);
    chmod((dir_.path() + "/tokens").c_str(), 0644);
  }

  bool Start(std::vector<std::string> extra = {}) {
    if (std::find(extra.begin(), extra.end(), "--lease-clients") == extra.end()) {
      extra.insert(extra.end(), {"--lease-clients", "*"});  // no one may, unless named
    }
    extra.insert(extra.end(), {"--token-file", dir_.path() + "/tokens", "--sysfs-root", sysfs_.root,
                               "--state-dir", dir_.path() + "/state"});
    daemon_.set_stderr(dir_.path() + "/kprofd.log");
    return daemon_.Start(dir_.path() + "/cache", extra);
  }

  std::unique_ptr<client::Client> Connect(const std::string& token, const std::string& lease = "") {
    auto connected = ::kprof::testing::ConnectWithToken(daemon_.target(), token, lease);
    EXPECT_THAT(connected, IsOk());
    return connected.ok() ? *std::move(connected) : nullptr;
  }

  static Held Ask(client::Client& client, const std::string& device, double seconds,
                  bool lock = false) {
    Held held;
    held.lease = client.OpenLease();
    v1::LeaseRequest request;
    request.set_device(device);
    request.set_seconds(seconds);
    request.set_lock_clocks(lock);
    EXPECT_TRUE(held.lease->stream->Write(request));
    EXPECT_TRUE(held.lease->stream->Read(&held.first));
    return held;
  }

  // Releases and reads to the end: the ENDED update.
  static v1::LeaseUpdate Release(Held& held) {
    v1::LeaseRequest release;
    release.set_release(true);
    EXPECT_TRUE(held.lease->stream->Write(release));
    v1::LeaseUpdate update, ended;
    while (held.lease->stream->Read(&update)) ended = update;
    held.lease->stream->WritesDone();
    EXPECT_TRUE(held.lease->stream->Finish().ok());
    return ended;
  }

  // The leases' clock journals in the state directory.
  int Journals() const {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/state")) {
      count += entry.path().filename().string().rfind("clocks-", 0) == 0;
    }
    return count;
  }

  TempDir dir_;
  FakeSysfs sysfs_{dir_.path() + "/host"};
  Daemon daemon_;
};

}  // namespace kprof

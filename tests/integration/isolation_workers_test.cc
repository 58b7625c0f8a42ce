// A worker per client: state one client leaves is never seen by another, scratch directories
// of their own, workers bounded and retired, clients served in turn, each seeing only its modules.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/sha256.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "emulation.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "processes.h"
#include "status_matchers.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::ConnectAs;
using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::kprof::testing::WriteTokenFile;
using ::testing::HasSubstr;
using ::testing::Not;

// Jobs of one client in a worker of its own: what one client's function leaves in its process
// (here, an environment variable no check looks at) is never seen by another client's job.
class ClientWorkersTest : public ::testing::Test {
 protected:
  void Start(int clients, std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--token-file", WriteTokenFile(dir_.path(), clients)});
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", extra));
    for (int i = 0; i < clients; ++i) {
      auto connected = ConnectAs(daemon_.target(), i);
      ASSERT_THAT(connected, IsOk());
      clients_.push_back(*std::move(connected));
      auto attacks = clients_.back()->LoadModuleFile(TestModulePath("attacks"));
      ASSERT_THAT(attacks, IsOk());
      attacks_ = attacks->id();
    }
  }

  absl::Status Run(int client, const std::string& function) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(attacks_);
    request.mutable_call()->set_function(function);
    request.set_number(1);
    request.set_repeat(1);
    return clients_[client]->TimeEvaluate(request).status();
  }

  v1::DeviceInfo Cpu() {
    auto info = clients_[0]->Info();
    EXPECT_THAT(info, IsOk());
    return info.ok() ? info->devices(0) : v1::DeviceInfo();
  }

  TempDir dir_;
  Daemon daemon_;
  std::vector<std::unique_ptr<client::Client>> clients_;
  std::string attacks_;
};

TEST_F(ClientWorkersTest, StateOneClientLeavesIsNeverSeenByAnother) {
  Start(2);
  ASSERT_THAT(Run(0, "plants_state"), IsOk());
  EXPECT_THAT(Run(1, "sees_planted_state"), IsOk());
  // The state is there, in the planter's own worker: the test could see it.
  EXPECT_THAT(Run(0, "sees_planted_state"),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("returned 42")));
  EXPECT_THAT(Run(1, "sees_planted_state"), IsOk());
  EXPECT_EQ(Cpu().workers(), 2);
  EXPECT_EQ(Cpu().workers_started(), 2);
}

// Each worker writes only in a scratch directory of its own ($TMPDIR), beneath the daemon's
// --scratch-dir; one that leaves files there is replaced and its directory removed with it.
TEST_F(ClientWorkersTest, EachWorkerHasAScratchDirectoryOfItsOwnRemovedWithIt) {
  KPROF_SKIP_UNDER_EMULATION("has no Landlock");
  const std::string base = dir_.path() + "/scratch";
  ASSERT_EQ(mkdir(base.c_str(), 0700), 0);
  // A root daemon's workers are another user, who must reach the directory.
  ASSERT_EQ(chmod(dir_.path().c_str(), 0711), 0);
  ASSERT_EQ(chmod(base.c_str(), 0711), 0);
  // What a daemon killed before it could clean up left: removed by the next one.
  const std::string stale = base + "/kprofd.999999999.abcdef";
  ASSERT_EQ(mkdir(stale.c_str(), 0700), 0);
  // A running daemon's root is locked, whatever its number says (another PID namespace's).
  const std::string live = base + "/kprofd.999999998.ghijkl";
  ASSERT_EQ(mkdir(live.c_str(), 0700), 0);
  const int lock = open(live.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(flock(lock, LOCK_EX), 0);
  // A root another daemon is making (named so until it is locked) is left alone; one left
  // making for a minute was a daemon's killed meanwhile.
  const std::string making = base + "/.kprofd-making.999999997.mnopqr";
  const std::string made_long_ago = base + "/.kprofd-making.999999996.stuvwx";
  ASSERT_EQ(mkdir(making.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(made_long_ago.c_str(), 0700), 0);
  const struct timeval long_ago[2] = {{time(nullptr) - 120, 0}, {time(nullptr) - 120, 0}};
  ASSERT_EQ(utimes(made_long_ago.c_str(), long_ago), 0);
  Start(2, {"--scratch-dir", base});
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(making));
  EXPECT_FALSE(std::filesystem::exists(made_long_ago));
  std::filesystem::remove(making);
  close(lock);
  std::filesystem::remove(live);
  ASSERT_THAT(Run(0, "writes_its_scratch"), IsOk());
  ASSERT_THAT(Run(1, "writes_its_scratch"), IsOk());
  // One root, one directory per live worker (the host's describer is gone), all empty.
  const auto workers = [&] {
    std::vector<std::string> found;
    for (const auto& root : std::filesystem::directory_iterator(base)) {
      for (const auto& w : std::filesystem::directory_iterator(root.path())) {
        found.push_back(w.path().string());
        EXPECT_TRUE(std::filesystem::is_empty(w.path())) << w.path();
      }
    }
    return found;
  };
  const std::vector<std::string> before = workers();
  EXPECT_EQ(before.size(), 2u);
  EXPECT_THAT(Run(0, "leaves_a_file_in_its_scratch"),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("left 1 file(s) in its scratch directory ($TMPDIR, first "
                                 "'left-behind'); its worker was replaced")));
  // Client 0's went with its worker; its replacement, started at once, has a fresh one.
  const auto kept = [](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return std::count_if(a.begin(), a.end(),
                         [&](const std::string& d) { return std::count(b.begin(), b.end(), d); });
  };
  const std::vector<std::string> after = workers();
  EXPECT_EQ(after.size(), 2u);
  EXPECT_EQ(kept(before, after), 1);  // client 1's
  ASSERT_THAT(Run(0, "writes_its_scratch"), IsOk());
  EXPECT_EQ(workers().size(), 2u);
  EXPECT_EQ(Cpu().workers_started(), 3);
  // A directory its owner may not enter goes too.
  const std::vector<std::string> before_locked = workers();
  EXPECT_THAT(Run(1, "leaves_a_locked_directory"),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("in its scratch directory")));
  EXPECT_EQ(kept(before_locked, workers()), 1);  // client 0's
  ASSERT_THAT(Run(1, "writes_its_scratch"), IsOk());
  // The daemon ends: the root goes, with every worker's directory.
  clients_.clear();
  daemon_.Stop();
  EXPECT_TRUE(std::filesystem::is_empty(base));
}

TEST_F(ClientWorkersTest, WorkersAreBoundedAndTheOneIdleLongestEnds) {
  Start(3, {"--workers-per-device", "2"});
  ASSERT_THAT(Run(0, "plants_state"), IsOk());
  ASSERT_THAT(Run(1, "sees_planted_state"), IsOk());
  EXPECT_EQ(Cpu().workers(), 2);
  // A third client: client 0's worker, idle longest, ends; client 1's is kept.
  ASSERT_THAT(Run(2, "sees_planted_state"), IsOk());
  EXPECT_EQ(Cpu().workers(), 2);
  EXPECT_EQ(Cpu().workers_started(), 3);
  ASSERT_THAT(Run(1, "sees_planted_state"), IsOk());
  EXPECT_EQ(Cpu().workers_started(), 3) << "client 1's worker was kept for its next job";
  // Client 0 comes back to a fresh worker, without what it planted.
  EXPECT_THAT(Run(0, "sees_planted_state"), IsOk());
  EXPECT_EQ(Cpu().workers_started(), 4);
}

TEST_F(ClientWorkersTest, AWorkerWithoutJobsEndsAfterTheIdleTimeout) {
  Start(1, {"--worker-idle-timeout", "1s"});
  ASSERT_THAT(Run(0, "sees_planted_state"), IsOk());
  bool ended = false;
  for (int i = 0; i < 300 && !ended; ++i) {
    ended = Cpu().workers() == 0;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(ended) << "the idle worker still runs after 15 s";
  EXPECT_THAT(Run(0, "sees_planted_state"), IsOk());
  EXPECT_EQ(Cpu().workers_started(), 2);
}

// The queue takes clients in turn: a client with one job waits for the running job and at
// most one more, not for everything another client queued before it.
TEST_F(ClientWorkersTest, TheQueueTakesClientsInTurn) {
  Start(2);
  std::string kernel;
  for (auto& client : clients_) {
    auto module = client->LoadModuleFile(TestModulePath("candidate_6"));  // 12 ms
    ASSERT_THAT(module, IsOk());
    kernel = module->id();
  }
  const auto timing = [&](int client) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(kernel);
    request.mutable_call()->set_function("gemm");
    request.set_number(1);
    request.set_repeat(4);  // about 50 ms a job
    return clients_[client]->TimeEvaluate(request);
  };
  constexpr int kFlood = 8;
  std::atomic<int> flood_done{0};
  std::mutex flood_mutex;
  std::vector<v1::JobTiming> flood_timings;
  std::vector<std::thread> flood;
  for (int i = 0; i < kFlood; ++i) {
    flood.emplace_back([&] {
      auto flooded = timing(0);
      EXPECT_THAT(flooded, IsOk());
      ++flood_done;
      if (!flooded.ok()) return;
      std::lock_guard<std::mutex> lock(flood_mutex);
      flood_timings.push_back(flooded->timing());
    });
  }
  // Client 0's jobs queued behind its running one.
  bool queued = false;
  for (int i = 0; i < 400 && !queued; ++i) {
    queued = Cpu().queue_length() >= kFlood - 2;
    if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(queued);
  auto mine = timing(1);
  const int flood_done_then = flood_done.load();
  for (std::thread& t : flood) t.join();
  ASSERT_THAT(mine, IsOk());
  // First come, first served would have it wait for all of them. Which jobs ran before it is
  // read from the device's own order, and its wait is weighed against client 0's jobs' times
  // in the same run: a loaded host (a sanitizer build, a busy CI machine) slows both alike.
  EXPECT_LE(flood_done_then, 3) << "client 1 waited for " << flood_done_then
                                << " of client 0's jobs";
  ASSERT_EQ(flood_timings.size(), static_cast<size_t>(kFlood));
  int ran_before = 0;
  double longest = 0;
  for (const v1::JobTiming& t : flood_timings) {
    if (t.sequence() < mine->timing().sequence()) ++ran_before;
    longest = std::max(longest, t.execution_seconds());
  }
  // At most two ran before client 1's job was queued (the queue held six), then the running
  // one and at most one more.
  EXPECT_LE(ran_before, 4) << "client 0's jobs that ran before client 1's";
  EXPECT_LT(mine->timing().queue_wait_seconds(), 3 * longest + 0.05)
      << "client 1 waited longer than three of client 0's jobs (" << longest << " s each)";
}

// Modules have holders: a client sees, runs and unloads only what it uploaded; bytes two
// clients upload are stored once; holds survive a restart.
TEST_F(ClientWorkersTest, AClientSeesRunsAndUnloadsOnlyTheModulesItHolds) {
  Start(2);  // both hold the attacks module
  auto mine = clients_[0]->LoadModuleFile(TestModulePath("candidate_1"));
  ASSERT_THAT(mine, IsOk());
  const std::string id = mine->id();
  const auto run = [&](int client) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(id);
    request.mutable_call()->set_function("gemm");
    request.set_number(1);
    request.set_repeat(1);
    return clients_[client]->TimeEvaluate(request).status();
  };
  const auto lists = [&](int client) {
    auto modules = clients_[client]->ListModules();
    EXPECT_THAT(modules, IsOk());
    for (const v1::ModuleInfo& m : modules.ok() ? *modules : std::vector<v1::ModuleInfo>()) {
      if (m.id() == id) return true;
    }
    return false;
  };
  EXPECT_THAT(run(0), IsOk());
  EXPECT_TRUE(lists(0));
  EXPECT_FALSE(lists(1));
  EXPECT_THAT(clients_[1]->HasModule(id), IsOkAndHolds(false));
  EXPECT_THAT(run(1), StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown module")));
  EXPECT_THAT(clients_[1]->UnloadModule(id), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(run(0), IsOk()) << "another client's unload took the module away";

  // The same bytes from the other client: one copy, two holders.
  ASSERT_THAT(clients_[1]->LoadModuleFile(TestModulePath("candidate_1")), IsOk());
  EXPECT_THAT(run(1), IsOk());
  EXPECT_TRUE(std::ifstream(dir_.path() + "/cache/modules/" + id).good());
  EXPECT_THAT(clients_[0]->UnloadModule(id), IsOk());
  EXPECT_FALSE(lists(0));
  // (Not a run: the client library uploads again the modules it uploaded itself.)
  EXPECT_THAT(clients_[0]->HasModule(id), IsOkAndHolds(false));
  EXPECT_THAT(run(1), IsOk()) << "client 0's unload dropped only its own hold";

  // Holds are on disk: after a restart, client 1 still runs it and client 0 still cannot. The
  // cache is put back as an older daemon left it, name and format in a .meta file beside the
  // module and the holders in a .holders file (labels in hex), which the start moves into the
  // cache's journal.
  daemon_.Stop();
  const std::string stored = dir_.path() + "/cache/modules/" + id;
  const std::string journal = dir_.path() + "/cache/modules/journal";
  const auto journal_record = [&]() -> nlohmann::json {
    nlohmann::json last;
    std::ifstream in(journal);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (record["id"] == id) last = record;
    }
    return last;
  };
  {
    const nlohmann::json record = journal_record();
    ASSERT_TRUE(record.contains("holders")) << record.dump();
    EXPECT_EQ(record["holders"], nlohmann::json::array({"636c69656e742d31"}));  // "client-1"
    EXPECT_EQ(record["format"], "shared-library");
    std::ofstream(stored + ".holders") << record["holders"].dump();
    std::ofstream(stored + ".meta")
        << nlohmann::json{{"name", record["name"]}, {"format", record["format"]}}.dump();
    ASSERT_EQ(unlink(journal.c_str()), 0);
  }
  ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", {"--token-file", dir_.path() + "/tokens"}));
  EXPECT_FALSE(std::ifstream(stored + ".holders").good());
  EXPECT_FALSE(std::ifstream(stored + ".meta").good());
  EXPECT_EQ(journal_record()["holders"], nlohmann::json::array({"636c69656e742d31"}));
  for (int i = 0; i < 2; ++i) {
    auto connected = ConnectAs(daemon_.target(), i);
    ASSERT_THAT(connected, IsOk());
    clients_[i] = *std::move(connected);
  }
  EXPECT_THAT(run(1), IsOk());
  EXPECT_THAT(run(0), StatusIs(absl::StatusCode::kNotFound));
  // The last holder's unload removes the bytes.
  EXPECT_THAT(clients_[1]->UnloadModule(id), IsOk());
  EXPECT_FALSE(std::ifstream(dir_.path() + "/cache/modules/" + id).good());
}

}  // namespace
}  // namespace kprof

// kprofd's /metrics holds against its own clients: a connection that sends nothing does not
// block the scrapes, a flood of scrapes is paced, and the HTTP server's threads keep out of the
// measurements' way (nice 19, off the --pin-cpus CPUs).
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_get.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof {
namespace {

using ::kprof::testing::ConnectTcp;
using ::kprof::testing::Daemon;
using ::kprof::testing::HttpGet;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;

// The CPUs this process may run on.
std::vector<int> OurCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// The ids of `pid`'s threads whose name begins with `prefix`.
std::vector<int> ThreadsNamed(pid_t pid, const std::string& prefix) {
  std::vector<int> found;
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return found;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::string name;
    std::getline(std::ifstream(tasks + "/" + entry->d_name + "/comm"), name);
    if (absl::StartsWith(name, prefix)) found.push_back(std::stoi(entry->d_name));
  }
  closedir(dir);
  return found;
}

// A thread's nice value (field 19 of its stat line).
int NiceOf(pid_t pid, int tid) {
  std::string line;
  std::getline(std::ifstream(absl::StrCat("/proc/", pid, "/task/", tid, "/stat")), line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string field;
  for (int k = 3; k <= 19 && fields >> field; ++k) {
  }
  return std::stoi(field);
}

class MetricsHoldTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--metrics-listen", "127.0.0.1:0"});
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", extra))
        << "kprofd did not start, status " << daemon_.exit_status();
    auto client = client::Client::Connect(daemon_.target());
    ASSERT_THAT(client, IsOk());
    auto info = (*client)->Info();
    ASSERT_THAT(info, IsOk());
    metrics_ = info->metrics();
  }

  TempDir dir_;
  Daemon daemon_;
  std::string metrics_;
};

TEST_F(MetricsHoldTest, ConnectionsThatSendNothingOrHalfARequestDoNotBlockTheScrapes) {
  ASSERT_NO_FATAL_FAILURE(Start({}));
  const int idle = ConnectTcp(metrics_);
  const int half = ConnectTcp(metrics_);
  ASSERT_GE(idle, 0);
  ASSERT_GE(half, 0);
  ASSERT_EQ(write(half, "GET /metr", 9), 9);
  // Each within HttpGet's 10 s: the server's other threads serve while these two hold theirs.
  for (int scrape = 0; scrape < 3; ++scrape) {
    EXPECT_THAT(HttpGet(metrics_, "/metrics"), HasSubstr("kprofd_batch_streams_open"))
        << "scrape " << scrape;
  }
  // And they are let go: the server closes them (read gives 0) within its 2 s request limit.
  timeval timeout{20, 0};
  setsockopt(idle, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char byte;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_LE(read(idle, &byte, 1), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  close(idle);
  close(half);
}

TEST_F(MetricsHoldTest, AFloodOfScrapesIsServedOneAtATimeATenthOfASecondApart) {
  ASSERT_NO_FATAL_FAILURE(Start({}));
  const auto start = std::chrono::steady_clock::now();
  constexpr int kScrapes = 11;
  for (int scrape = 0; scrape < kScrapes; ++scrape) {
    ASSERT_THAT(HttpGet(metrics_, "/metrics"), HasSubstr("kprofd_batch_streams_open")) << scrape;
  }
  // The first may go at once; the ten after it wait 100 ms each at least.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
}

TEST_F(MetricsHoldTest, TheServersThreadsRunAtNice19OffTheCpusTheWorkersMeasureOn) {
  const std::vector<int> cpus = OurCpus();
  std::vector<std::string> extra;
  if (cpus.size() >= 2) extra = {"--pin-cpus", std::to_string(cpus.back())};
  ASSERT_NO_FATAL_FAILURE(Start(extra));
  ASSERT_THAT(HttpGet(metrics_, "/metrics"), HasSubstr("kprofd_batch_streams_open"));
  const std::vector<int> threads = ThreadsNamed(daemon_.pid(), "civetweb");
  ASSERT_GE(threads.size(), 2u) << "the HTTP server's master and worker threads";
  for (const int tid : threads) {
    EXPECT_EQ(NiceOf(daemon_.pid(), tid), 19) << "thread " << tid;
    if (cpus.size() < 2) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(tid, sizeof set, &set), 0);
    EXPECT_FALSE(CPU_ISSET(cpus.back(), &set))
        << "thread " << tid << " may run on CPU " << cpus.back() << ", where the workers measure";
    EXPECT_GT(CPU_COUNT(&set), 0);
  }
  // The daemon's own threads keep their CPUs and priority.
  EXPECT_EQ(NiceOf(daemon_.pid(), daemon_.pid()), 0);
}

}  // namespace
}  // namespace kprof

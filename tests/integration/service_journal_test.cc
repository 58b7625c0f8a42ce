// kprofd's logs in the journal: with --log-format journal each message goes out in the journal's
// native protocol with its fields. The daemon runs in a mount namespace of its own whose
// /run/systemd/journal is a directory of the test's, holding a datagram socket the test reads —
// where journald's socket would be — so the test sees what libsystemd sends, field by field.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

using Entry = std::map<std::string, std::string>;

// One datagram of the journal's native protocol: KEY=value lines, or KEY, a newline, a 64-bit
// little-endian length and that many bytes, for values with newlines.
Entry Parse(const std::string& datagram) {
  Entry entry;
  size_t at = 0;
  while (at < datagram.size()) {
    const size_t end = datagram.find('\n', at);
    if (end == std::string::npos) break;
    const std::string line = datagram.substr(at, end - at);
    const size_t equals = line.find('=');
    if (equals != std::string::npos) {
      entry[line.substr(0, equals)] = line.substr(equals + 1);
      at = end + 1;
      continue;
    }
    uint64_t size = 0;
    if (end + 1 + 8 > datagram.size()) break;
    std::memcpy(&size, datagram.data() + end + 1, 8);
    entry[line] = datagram.substr(end + 1 + 8, size);
    at = end + 1 + 8 + size + 1;
  }
  return entry;
}

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The daemon's own mount namespace and a bind mount in it are root's (CI runs as root).
    if (geteuid() != 0) GTEST_SKIP() << "needs root for the daemon's mount namespace";
    chmod(dir_.path().c_str(), 0755);
    std::filesystem::create_directories(dir_.path() + "/journal");
    socket_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(socket_, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = dir_.path() + "/journal/socket";
    ASSERT_LT(path.size(), sizeof address.sun_path);
    std::strcpy(address.sun_path, path.c_str());
    ASSERT_EQ(bind(socket_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
        << std::strerror(errno);
    chmod(path.c_str(), 0666);
    daemon_.set_launcher(
        {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
         absl::StrCat("mkdir -p /run/systemd/journal && mount --bind ", dir_.path(),
                      "/journal /run/systemd/journal && exec \"$0\" \"$@\"")});
  }
  void TearDown() override {
    if (socket_ >= 0) close(socket_);
  }

  // The first entry sent that satisfies `wanted`, within 10 s.
  template <typename Wanted>
  std::optional<Entry> ReadUntil(Wanted wanted) {
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (absl::Now() < until) {
      pollfd fd{socket_, POLLIN, 0};
      if (poll(&fd, 1, 100) <= 0) continue;
      std::string buffer(1 << 16, '\0');
      const ssize_t n = recv(socket_, buffer.data(), buffer.size(), 0);
      if (n <= 0) continue;
      buffer.resize(static_cast<size_t>(n));
      Entry entry = Parse(buffer);
      if (wanted(entry)) return entry;
    }
    return std::nullopt;
  }

  TempDir dir_;
  Daemon daemon_;
  int socket_ = -1;
};

TEST_F(JournalTest, MessagesCarryTheJobDeviceClientAndCode) {
  ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache",
                            {"--log-format", "journal", "--lease-clients", "local"}));
  std::optional<Entry> serving = ReadUntil([](const Entry& e) {
    return e.count("MESSAGE") > 0 && e.at("MESSAGE").find("serving on") != std::string::npos;
  });
  ASSERT_TRUE(serving.has_value()) << "the daemon's start did not reach the journal's socket";
  EXPECT_EQ((*serving)["SYSLOG_IDENTIFIER"], "kprofd");
  EXPECT_EQ((*serving)["PRIORITY"], "6");

  auto client = client::Client::Connect(daemon_.target());
  ASSERT_THAT(client, IsOk());
  auto module = (*client)->LoadModuleFile(TestModulePath("faults"));
  ASSERT_THAT(module, IsOk());
  v1::TimeEvaluateRequest request;
  request.mutable_call()->set_module_id(module->id());
  request.mutable_call()->set_function("segfault");
  request.set_repeat(1);
  EXPECT_FALSE((*client)->TimeEvaluate(request).ok());
  std::optional<Entry> crash = ReadUntil([](const Entry& e) { return e.count("JOB_ID") > 0; });
  ASSERT_TRUE(crash.has_value()) << "no message with a JOB_ID";
  EXPECT_EQ((*crash)["DEVICE"], "cpu:0");
  EXPECT_EQ((*crash)["CLIENT"], "local");
  EXPECT_EQ((*crash)["CODE"], "ABORTED");
  EXPECT_EQ((*crash)["PRIORITY"], "4");
  EXPECT_FALSE((*crash)["JOB_ID"].empty());
  EXPECT_THAT((*crash)["MESSAGE"], HasSubstr("SIGSEGV"));

  // A lease's grant, with a prefix of its id: enough to follow it, not to make calls under it.
  std::unique_ptr<client::Client::LeaseStream> lease = (*client)->OpenLease();
  v1::LeaseRequest ask;
  ask.set_device("cpu:0");
  ask.set_seconds(30);
  ASSERT_TRUE(lease->stream->Write(ask));
  v1::LeaseUpdate granted;
  ASSERT_TRUE(lease->stream->Read(&granted));
  std::optional<Entry> granting = ReadUntil([](const Entry& e) { return e.count("LEASE_ID") > 0; });
  ASSERT_TRUE(granting.has_value()) << "no message with a LEASE_ID";
  EXPECT_EQ((*granting)["LEASE_ID"], granted.lease().lease_id().substr(0, 8));
  EXPECT_EQ((*granting)["CLIENT"], "local");
  EXPECT_THAT((*granting)["MESSAGE"], ::testing::Not(HasSubstr(granted.lease().lease_id())));
  lease->stream->WritesDone();
  v1::LeaseUpdate update;
  while (lease->stream->Read(&update)) {
  }
  EXPECT_TRUE(lease->stream->Finish().ok());
}

TEST_F(JournalTest, AnUnknownLogFormatIsRefusedSayingWhatIsAccepted) {
  daemon_.set_launcher({});
  daemon_.set_stderr(dir_.path() + "/kprofd.log");
  EXPECT_FALSE(daemon_.Start(dir_.path() + "/cache", {"--log-format", "json"}));
  std::ifstream log(dir_.path() + "/kprofd.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text,
              HasSubstr("--log-format 'json': auto (the journal under systemd), journal or plain"));
  if (access("/run/systemd/journal/socket", W_OK) != 0) {
    // No journal on this host: asked for it, the daemon says so rather than log into nothing.
    Daemon without;
    without.set_stderr(dir_.path() + "/without.log");
    EXPECT_FALSE(without.Start(dir_.path() + "/cache2", {"--log-format", "journal"}));
    std::ifstream said(dir_.path() + "/without.log");
    const std::string why((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
    EXPECT_THAT(why, HasSubstr("--log-format journal: there is no journal here"));
  }
}

}  // namespace
}  // namespace kprof

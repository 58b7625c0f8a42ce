// systemd's notification and journal protocols as kprofd speaks them, read back from real
// AF_UNIX datagram sockets of the test's own, the way systemd and journald receive them.
#include "server/front/daemon/service_manager.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace kprof::server {
namespace {

using ::kprof::testing::TempDir;

// A datagram socket bound at `path` ("@name": abstract), which the test reads.
class Receiver {
 public:
  explicit Receiver(const std::string& path) : fd_(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.data(), path.size());
    if (path[0] == '@') address.sun_path[0] = '\0';
    const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                                    (path[0] == '@' ? 0 : 1));
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0;
  }
  ~Receiver() { close(fd_); }
  bool bound() const { return bound_; }

  // The next datagram's bytes, or a descriptor's contents when it carries one; "" after 2 s.
  std::string Next(bool* by_descriptor = nullptr) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 2000) != 1) return "";
    std::string buffer(1 << 20, '\0');
    iovec vector{buffer.data(), buffer.size()};
    alignas(cmsghdr) char control[256];
    msghdr message{};
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &message, MSG_CMSG_CLOEXEC);
    if (n < 0) return "";
    buffer.resize(static_cast<size_t>(n));
    if (by_descriptor != nullptr) *by_descriptor = false;
    for (cmsghdr* h = CMSG_FIRSTHDR(&message); h != nullptr; h = CMSG_NXTHDR(&message, h)) {
      if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(h), sizeof fd);
      struct stat st {};
      fstat(fd, &st);
      std::string contents(static_cast<size_t>(st.st_size), '\0');
      EXPECT_EQ(pread(fd, contents.data(), contents.size(), 0), st.st_size);
      // Sealed: journald refuses a descriptor its sender could still change.
      EXPECT_EQ(fcntl(fd, F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW),
                F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW);
      close(fd);
      if (by_descriptor != nullptr) *by_descriptor = true;
      EXPECT_TRUE(buffer.empty()) << "a descriptor comes alone";
      return contents;
    }
    return buffer;
  }

 private:
  int fd_;
  bool bound_ = false;
};

// Sets an environment variable for the test's length.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(NotifyServiceManager, SendsTheStateToTheSocketNotifySocketNames) {
  TempDir dir;
  const std::string path = dir.path() + "/notify";
  Receiver systemd(path);
  ASSERT_TRUE(systemd.bound());
  ScopedEnv env("NOTIFY_SOCKET", path.c_str());
  ASSERT_TRUE(NotifyServiceManager("READY=1\nSTATUS=serving on 127.0.0.1:9177"));
  EXPECT_EQ(systemd.Next(), "READY=1\nSTATUS=serving on 127.0.0.1:9177");
  ASSERT_TRUE(NotifyServiceManager("WATCHDOG=1"));
  EXPECT_EQ(systemd.Next(), "WATCHDOG=1");
}

TEST(NotifyServiceManager, AnAbstractSocketToo) {
  const std::string name = absl::StrCat("@kprof-notify-test-", getpid());
  Receiver systemd(name);
  ASSERT_TRUE(systemd.bound());
  ScopedEnv env("NOTIFY_SOCKET", name.c_str());
  ASSERT_TRUE(NotifyServiceManager("STOPPING=1"));
  EXPECT_EQ(systemd.Next(), "STOPPING=1");
}

TEST(NotifyServiceManager, NothingWithoutASocketToSendTo) {
  {
    ScopedEnv env("NOTIFY_SOCKET", nullptr);
    EXPECT_FALSE(NotifyServiceManager("READY=1"));
  }
  for (const char* bad : {"", "relative/path", "@", "/nonexistent/kprof/notify"}) {
    ScopedEnv env("NOTIFY_SOCKET", bad);
    EXPECT_FALSE(NotifyServiceManager("READY=1")) << bad;
  }
}

TEST(WatchdogInterval, FromWatchdogUsecForThisProcessOnly) {
  {
    ScopedEnv usec("WATCHDOG_USEC", "30000000");
    ScopedEnv pid("WATCHDOG_PID", nullptr);
    EXPECT_EQ(WatchdogInterval(), absl::Seconds(30));
  }
  {
    ScopedEnv usec("WATCHDOG_USEC", "2000000");
    const std::string self = std::to_string(getpid());
    ScopedEnv pid("WATCHDOG_PID", self.c_str());
    EXPECT_EQ(WatchdogInterval(), absl::Seconds(2));
  }
  {
    ScopedEnv usec("WATCHDOG_USEC", "2000000");
    const std::string other = std::to_string(getpid() + 1);
    ScopedEnv pid("WATCHDOG_PID", other.c_str());
    EXPECT_EQ(WatchdogInterval(), std::nullopt) << "another process's watchdog";
  }
  for (const char* bad : {"0", "-5", "soon", ""}) {
    ScopedEnv usec("WATCHDOG_USEC", bad);
    ScopedEnv pid("WATCHDOG_PID", nullptr);
    EXPECT_EQ(WatchdogInterval(), std::nullopt) << bad;
  }
  ScopedEnv none("WATCHDOG_USEC", nullptr);
  EXPECT_EQ(WatchdogInterval(), std::nullopt);
}

TEST(SendToJournal, FieldsAsLinesAndAValueWithNewlinesInTheBinaryForm) {
  TempDir dir;
  const std::string path = dir.path() + "/socket";
  Receiver journald(path);
  ASSERT_TRUE(journald.bound());
  ASSERT_TRUE(SendToJournal({"MESSAGE=job done", "PRIORITY=6", "KPROF_STACK=one\ntwo"}, path));
  std::string expected = "MESSAGE=job done\nPRIORITY=6\nKPROF_STACK\n";
  expected += std::string("\x07\0\0\0\0\0\0\0", 8);  // 7, 64-bit little-endian
  expected += "one\ntwo\n";
  EXPECT_EQ(journald.Next(), expected);
}

TEST(SendToJournal, AnEntryLargerThanADatagramGoesInASealedMemfd) {
  TempDir dir;
  const std::string path = dir.path() + "/socket";
  Receiver journald(path);
  ASSERT_TRUE(journald.bound());
  const std::string big(4 << 20, 'k');  // past any datagram's limit
  ASSERT_TRUE(SendToJournal({"MESSAGE=" + big, "PRIORITY=3"}, path));
  bool by_descriptor = false;
  EXPECT_EQ(journald.Next(&by_descriptor), "MESSAGE=" + big + "\nPRIORITY=3\n");
  EXPECT_TRUE(by_descriptor);
}

TEST(SendToJournal, FalseWhereNoJournalListens) {
  TempDir dir;
  EXPECT_FALSE(SendToJournal({"MESSAGE=lost"}, dir.path() + "/socket"));
  EXPECT_FALSE(SendToJournal({"MESSAGE=lost"}, "not/absolute"));
}

}  // namespace
}  // namespace kprof::server

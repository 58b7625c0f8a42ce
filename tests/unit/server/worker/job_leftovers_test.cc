#include "server/worker/job_leftovers.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace kprof::server {
namespace {

using ::kprof::testing::TempDir;
using ::testing::HasSubstr;

// The process's threads once no thread is on its way out: a joined thread is taken out of
// /proc/self/task a moment after its joiner wakes (longer on a loaded host).
int SettledThreads() {
  int last = CountThreads(false), same = 0;
  for (int i = 0; i < 200 && same < 3; ++i) {
    usleep(5000);
    const int now = CountThreads(false);
    same = now == last ? same + 1 : 0;
    last = now;
  }
  return last;
}

TEST(JobLeftoversTest, CountsTheThreadsAJobLeavesRunning) {
  // A first thread, started and joined, lets a runtime that starts a thread of its own with the
  // process's second (ThreadSanitizer's) do so before the baseline is counted.
  std::thread([] {}).join();
  const int baseline = SettledThreads();
  ASSERT_GE(baseline, 1);
  std::atomic<bool> stop{false};
  std::thread left([&stop] {
    while (!stop) usleep(1000);
  });
  EXPECT_EQ(CountThreads(false), baseline + 1);
  EXPECT_EQ(CountThreads(true), baseline + 1);  // not a CUDA driver thread by its name
  const ScratchDirectory none("");
  if (fcntl(0, F_GETFD) >= 0 && fcntl(1, F_GETFD) >= 0 && fcntl(2, F_GETFD) >= 0) {
    EXPECT_EQ(Disturbance(baseline, false, none), "left 1 thread(s) running");
  }
  stop = true;
  left.join();
  EXPECT_EQ(SettledThreads(), baseline);
}

TEST(JobLeftoversTest, SeesFilesLeftInTheScratchDirectory) {
  TempDir dir;
  const ScratchDirectory scratch(dir.path());
  EXPECT_EQ(scratch.Leftovers(), "");
  std::ofstream(dir.path() + "/secret\n.txt") << "for the next job";
  std::ofstream(dir.path() + "/other") << "";
  const std::string left = scratch.Leftovers();
  EXPECT_THAT(left, HasSubstr("left 2 file(s) in its scratch directory"));
  // The name is escaped, whatever bytes it holds.
  EXPECT_TRUE(left.find("secret\\n.txt") != std::string::npos ||
              left.find("'other'") != std::string::npos)
      << left;
  EXPECT_EQ(ScratchDirectory("").Leftovers(), "");
  EXPECT_EQ(ScratchDirectory(dir.path() + "/missing").Leftovers(), "");
}

TEST(JobLeftoversTest, SeesTheScratchDescriptorReplaced) {
  TempDir dir, elsewhere;
  const ScratchDirectory scratch(dir.path());
  // A job that puts another directory on the descriptor, to hide its files there.
  const int other = open(elsewhere.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  // The scratch directory's own descriptor: the one open on the directory.
  int scratch_fd = -1;
  const int probe = open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  for (int fd = 3; fd < 1024 && scratch_fd < 0; ++fd) {
    if (fd != probe && fcntl(fd, F_GETFD) >= 0 && IdentityOf(fd) == IdentityOf(probe)) {
      scratch_fd = fd;
    }
  }
  close(probe);
  ASSERT_GE(scratch_fd, 0);
  ASSERT_EQ(dup3(other, scratch_fd, O_CLOEXEC), scratch_fd);
  close(other);
  EXPECT_EQ(scratch.Leftovers(), "closed or replaced the descriptor of its scratch directory");
}

TEST(JobLeftoversTest, IdentityNamesTheFileADescriptorIsOpenOn) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const int root = open("/", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(root, 0);
  EXPECT_FALSE(IdentityOf(pipe_fds[0]) == IdentityOf(root));
  EXPECT_TRUE(IdentityOf(pipe_fds[0]) == IdentityOf(pipe_fds[1]));  // both ends: one pipe inode
  close(root);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  EXPECT_TRUE(IdentityOf(-1) == FileIdentity{});
}

}  // namespace
}  // namespace kprof::server

// FrameChannel: frames over a socketpair, with descriptors passed along.
#include "server/ipc/frame_channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {
namespace {

int OpenDescriptors() {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
    closedir(dir);
  }
  return count - 1;  // the directory's own
}

class FrameChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair_), 0);
    ASSERT_EQ(pipe2(pipe_, O_CLOEXEC), 0);
  }
  void TearDown() override {
    for (int fd : {pair_[0], pair_[1], pipe_[0], pipe_[1]}) close(fd);
  }
  int pair_[2] = {-1, -1};
  int pipe_[2] = {-1, -1};
};

TEST_F(FrameChannelTest, DescriptorsTravelWithTheirFrame) {
  FrameChannel front(pair_[0], 1 << 20), worker(pair_[1], 1 << 20);
  kprof::worker::v1::WorkerRequest request;
  request.set_job_id(7);
  request.add_modules()->set_id("m");
  const int fds[] = {pipe_[1]};
  ASSERT_TRUE(front.Write(request, fds).ok());
  kprof::worker::v1::WorkerRequest received;
  std::vector<int> got;
  ASSERT_TRUE(worker.Read(&received, &got).ok());
  EXPECT_EQ(received.job_id(), 7u);
  ASSERT_EQ(got.size(), 1u);
  // The same pipe, through another descriptor, closed on exec.
  EXPECT_NE(got[0], pipe_[1]);
  EXPECT_EQ(fcntl(got[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(write(got[0], "x", 1), 1);
  char byte = 0;
  ASSERT_EQ(read(pipe_[0], &byte, 1), 1);
  EXPECT_EQ(byte, 'x');
  close(got[0]);
  // A frame without any.
  ASSERT_TRUE(front.Write(request).ok());
  got.clear();
  ASSERT_TRUE(worker.Read(&received, &got).ok());
  EXPECT_TRUE(got.empty());
}

TEST_F(FrameChannelTest, DescriptorsNobodyAskedForAreClosed) {
  FrameChannel worker(pair_[1], 1 << 20), front(pair_[0], 1 << 20);
  kprof::worker::v1::WorkerResponse response;
  response.set_job_id(1);
  const std::vector<int> many(FrameChannel::kMaxFds, pipe_[1]);
  const int before = OpenDescriptors();
  ASSERT_TRUE(worker.Write(response, many).ok());
  kprof::worker::v1::WorkerResponse received;
  ASSERT_TRUE(front.Read(&received).ok());
  EXPECT_EQ(received.job_id(), 1u);
  EXPECT_EQ(OpenDescriptors(), before);
}

TEST_F(FrameChannelTest, MoreDescriptorsThanAFrameCarriesAreRefused) {
  FrameChannel front(pair_[0], 1 << 20);
  kprof::worker::v1::WorkerRequest request;
  const std::vector<int> too_many(FrameChannel::kMaxFds + 1, pipe_[1]);
  const absl::Status s = front.Write(request, too_many);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("limit 253"), std::string::npos) << s;
}

// Several frames written at once, with more descriptors together than one message carries:
// each frame is read with its own, in order.
TEST_F(FrameChannelTest, FramesWrittenTogetherKeepTheirOwnDescriptors) {
  FrameChannel front(pair_[0], 1 << 20), worker(pair_[1], 1 << 20);
  int pipes[4][2];
  for (auto& p : pipes) ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  // Frame i carries 100 descriptors of pipe i (none for frame 3): 300 in all, over kMaxFds.
  std::vector<std::vector<int>> fds(4);
  std::vector<kprof::worker::v1::WorkerRequest> requests(4);
  std::vector<FrameChannel::Outgoing> frames;
  for (int i = 0; i < 4; ++i) {
    requests[i].set_job_id(static_cast<uint64_t>(i) + 1);
    if (i < 3) fds[i].assign(100, pipes[i][1]);
    frames.push_back({&requests[i], fds[i]});
  }
  ASSERT_TRUE(front.WriteMany(frames).ok());
  for (int i = 0; i < 4; ++i) {
    kprof::worker::v1::WorkerRequest received;
    std::vector<int> got;
    ASSERT_TRUE(worker.Read(&received, &got).ok()) << i;
    EXPECT_EQ(received.job_id(), static_cast<uint64_t>(i) + 1);
    ASSERT_EQ(got.size(), i < 3 ? 100u : 0u) << i;
    for (int fd : got) {
      // Each a descriptor of frame i's pipe: a byte written to it comes out of that pipe.
      ASSERT_EQ(write(fd, "x", 1), 1);
      char byte = 0;
      ASSERT_EQ(read(pipes[i][0], &byte, 1), 1) << "frame " << i;
      close(fd);
    }
  }
  for (auto& p : pipes) {
    close(p[0]);
    close(p[1]);
  }
}

// A frame of the set that cannot be sent fails the set before any is.
TEST_F(FrameChannelTest, ASetWithAFrameOverTheLimitIsNotSentAtAll) {
  FrameChannel front(pair_[0], 64), worker(pair_[1], 1 << 20);
  kprof::worker::v1::WorkerRequest small, large;
  small.set_job_id(1);
  large.set_job_id(2);
  large.add_modules()->set_path(std::string(100, 'p'));
  const FrameChannel::Outgoing frames[] = {{&small, {}}, {&large, {}}};
  EXPECT_EQ(front.WriteMany(frames).code(), absl::StatusCode::kResourceExhausted);
  kprof::worker::v1::WorkerRequest received;
  absl::Status status;
  EXPECT_FALSE(worker.TryRead(&received, nullptr, &status));
  EXPECT_TRUE(status.ok()) << status;
}

// A yield goes whole at once or not at all: behind a peer that reads nothing until the socket is
// full it is refused without blocking, and every frame the peer then reads is whole.
TEST_F(FrameChannelTest, ASmallFrameTriedGoesWholeOrNotAtAll) {
  FrameChannel front(pair_[0], 1 << 20), worker(pair_[1], 1 << 20);
  kprof::worker::v1::WorkerRequest yield;
  yield.mutable_yield();
  ASSERT_TRUE(front.TryWriteSmall(yield));
  kprof::worker::v1::WorkerRequest received;
  ASSERT_TRUE(worker.Read(&received).ok());
  EXPECT_TRUE(received.has_yield());
  // The socket filled with yields until one is refused: none blocked, none was cut.
  int sent = 0;
  while (front.TryWriteSmall(yield)) ASSERT_LT(++sent, 1 << 22) << "never refused";
  EXPECT_GT(sent, 0);
  for (int i = 0; i < sent; ++i) {
    received.Clear();
    ASSERT_TRUE(worker.Read(&received).ok()) << "frame " << i;
    ASSERT_TRUE(received.has_yield()) << "frame " << i;
  }
  EXPECT_FALSE(worker.Poll()) << "a part of a frame was left";
  // Room again: it goes; a frame that is not small never does.
  EXPECT_TRUE(front.TryWriteSmall(yield));
  kprof::worker::v1::WorkerRequest large;
  large.add_modules()->set_id(std::string(100, 'm'));
  EXPECT_FALSE(front.TryWriteSmall(large));
  ASSERT_TRUE(worker.Read(&received).ok());
  EXPECT_TRUE(received.has_yield());
  // The peer gone: refused, no SIGPIPE.
  close(pair_[1]);
  pair_[1] = -1;
  EXPECT_FALSE(front.TryWriteSmall(yield));
}

}  // namespace
}  // namespace kprof::server

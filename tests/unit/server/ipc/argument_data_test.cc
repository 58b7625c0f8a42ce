// ReadArgumentFile: what a worker's arguments' file must hold — sealed, exactly the bytes its
// ArgumentData names (unsent arguments left out, a reference's initial bytes after) — and the
// malformed answers it refuses as DATA_LOSS.
#include "server/ipc/argument_data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::server {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::HasSubstr;

// A sealed memfd holding `bytes`.
int SealedFile(const std::string& bytes) {
  const int fd = memfd_create("test-arguments", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK), 0);
  return fd;
}

TEST(ReadArgumentFile, ReadsWhatIsSentAndRefusesWhatDoesNotAddUp) {
  const int fd = SealedFile("abcdXY");
  worker::v1::WorkerAnswer answer;
  worker::v1::ArgumentData* data = answer.mutable_arguments();
  data->add_sizes(4);  // sent: abcd
  data->add_sizes(8);  // unsent
  data->add_sizes(2);  // sent: XY
  data->add_unsent(false);
  data->add_unsent(true);
  ASSERT_THAT(ReadArgumentFile(fd, &answer), IsOk());
  EXPECT_EQ(answer.argument_bytes(), "abcdXY");

  worker::v1::WorkerAnswer initial = answer;  // a reference's: argument 0's initial bytes too
  initial.mutable_arguments()->clear_unsent();
  initial.mutable_arguments()->set_sizes(1, 0);
  initial.mutable_arguments()->set_sizes(2, 0);
  initial.mutable_arguments()->add_initial(2);
  EXPECT_THAT(ReadArgumentFile(fd, &initial),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("sizes add up to 4")));
  initial.mutable_arguments()->set_initial(0, 0);
  initial.mutable_arguments()->set_sizes(0, 3);
  EXPECT_THAT(ReadArgumentFile(fd, &initial), IsOk());

  worker::v1::WorkerAnswer more_unsent = answer;
  for (int k = 0; k < 3; ++k) more_unsent.mutable_arguments()->add_unsent(false);
  EXPECT_THAT(ReadArgumentFile(fd, &more_unsent),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("leaves out 5 of 3 arguments")));
  worker::v1::WorkerAnswer far = answer;
  far.mutable_arguments()->add_initial(7);
  EXPECT_THAT(ReadArgumentFile(fd, &far),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("initial bytes of argument 7")));
  worker::v1::WorkerAnswer wrapping = answer;  // (2^64 - 2) + 8 wraps around to the file's 6
  wrapping.mutable_arguments()->set_sizes(0, ~uint64_t{0} - 1);
  wrapping.mutable_arguments()->set_sizes(2, 8);
  EXPECT_THAT(ReadArgumentFile(fd, &wrapping),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("past 2^64")));
  close(fd);
}

}  // namespace
}  // namespace kprof::server

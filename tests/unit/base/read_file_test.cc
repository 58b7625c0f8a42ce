#include "base/read_file.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof::base {
namespace {

using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ReadFile, ReadsEveryByteIncludingNuls) {
  TempDir dir;
  const std::string path = dir.path() + "/bytes";
  const std::string bytes("a\0b\nc", 5);
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(*ReadFile(path), bytes);
}

TEST(ReadFile, AMissingFileIsNotFoundNamingWhatAndWhy) {
  EXPECT_THAT(ReadFile("/nonexistent/x", "the TLS key"),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("cannot read the TLS key '/nonexistent/x'"),
                             HasSubstr("No such file or directory"))));
}

TEST(ReadFile, ADirectoryIsSaidToBeOne) {
  TempDir dir;
  EXPECT_THAT(ReadFile(dir.path(), "report file"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot read report file '" + dir.path() +
                                 "': it is a directory, not a file")));
}

TEST(ReadFile, FilesTheKernelMakesAreReadToTheirEnd) {
  // /proc files say they are empty (st_size 0) and still have text.
  const absl::StatusOr<std::string> status = ReadFile("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_THAT(*status, HasSubstr("Name:"));
}

TEST(ReadSmallFile, TextOrNothing) {
  TempDir dir;
  std::ofstream(dir.path() + "/two") << "  first line \nsecond\n";
  std::ofstream(dir.path() + "/empty");
  EXPECT_EQ(ReadSmallFile(dir.path() + "/two"), "  first line \nsecond\n");
  EXPECT_EQ(ReadSmallFile(dir.path() + "/missing"), std::nullopt);
  EXPECT_EQ(ReadSmallFile(dir.path()), std::nullopt);  // a directory cannot be read
  EXPECT_EQ(ReadFirstLine(dir.path() + "/two"), "first line");
  EXPECT_EQ(ReadFirstLine(dir.path() + "/empty"), "");
  EXPECT_EQ(ReadFirstLine(dir.path() + "/missing"), std::nullopt);
  EXPECT_THAT(ReadFirstLine("/proc/loadavg").value_or(""), ::testing::MatchesRegex("[0-9.]+ .*"));
}

}  // namespace
}  // namespace kprof::base

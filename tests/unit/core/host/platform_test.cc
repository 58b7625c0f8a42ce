#include "core/host/platform.h"

#include <sys/utsname.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace kprof::core {
namespace {

using ::kprof::testing::TempDir;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// /etc/nv_tegra_release of a Jetson Orin flashed with JetPack 6.2.
constexpr char kJetPack62[] =
    "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed "
    "Jan  8 01:49:37 UTC 2025\n# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n"
    "TARGET_USERSPACE_LIB_DIR_PATH=usr/lib/aarch64-linux-gnu/nvidia\n";

TEST(NvTegraRelease, ParsesReleaseRevisionAndBoard) {
  const std::optional<L4tRelease> l4t = ParseNvTegraRelease(kJetPack62);
  ASSERT_TRUE(l4t.has_value());
  EXPECT_EQ(l4t->major, 36);
  EXPECT_EQ(l4t->minor, 4);
  EXPECT_EQ(l4t->patch, 3);
  EXPECT_EQ(l4t->board, "generic");
  // JetPack 4's line: a one-part revision is .0, the board a reference design's.
  const std::optional<L4tRelease> old =
      ParseNvTegraRelease("# R32 (release), REVISION: 7, GCID: 1, BOARD: t186ref, EABI: aarch64");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->minor, 7);
  EXPECT_EQ(old->patch, 0);
  EXPECT_EQ(old->board, "t186ref");
}

TEST(NvTegraRelease, RefusesWhatIsNotAReleaseLine) {
  for (const char* text : {"", "R36 (release), REVISION: 4.3", "# R (release), REVISION: 4.3",
                           "# R36 (release), GCID: 1", "# R36 (release), REVISION: four",
                           "# R36 (release), REVISION: 4.3.1.2", "# R-1 (release), REVISION: 1.0",
                           "# Rx (release), REVISION: 1.0"}) {
    EXPECT_FALSE(ParseNvTegraRelease(text).has_value()) << text;
  }
}

TEST(NvTegraRelease, JetPackOfEachL4tRelease) {
  EXPECT_EQ(JetPackRelease({36, 4, 3, ""}), "6.2");
  EXPECT_EQ(JetPackRelease({36, 3, 0, ""}), "6.0");
  EXPECT_EQ(JetPackRelease({35, 4, 1, ""}), "5.1.2");
  EXPECT_EQ(JetPackRelease({32, 7, 1, ""}), "4.6.1");
  EXPECT_EQ(JetPackRelease({38, 2, 0, ""}), "7.0");
  // A revision published after the table: its major's JetPack; an unknown major: nothing.
  EXPECT_EQ(JetPackRelease({36, 9, 0, ""}), "6");
  EXPECT_EQ(JetPackRelease({99, 1, 0, ""}), "");
}

TEST(DescribeJetson, NamesJetPackAndL4t) {
  TempDir dir;
  dir.WriteFile("etc/nv_tegra_release", kJetPack62);
  EXPECT_EQ(DescribeJetson(dir.path()), "JetPack 6.2 (L4T R36.4.3, board generic)");
  dir.WriteFile("etc/nv_tegra_release", "# R39 (release), REVISION: 1.0, GCID: 2\n");
  EXPECT_EQ(DescribeJetson(dir.path()), "L4T R39.1.0 (JetPack unknown)");
  dir.WriteFile("etc/nv_tegra_release", "garbled\nsecond line\n");
  EXPECT_EQ(DescribeJetson(dir.path()), "nv_tegra_release unreadable: garbled");
  dir.WriteFile("etc/nv_tegra_release", std::string(5000, 'x'));
  EXPECT_EQ(DescribeJetson(dir.path()),
            "nv_tegra_release unreadable: " + std::string(120, 'x') + "...");
}

TEST(DescribeJetson, NothingOffAJetson) {
  TempDir dir;
  EXPECT_THAT(DescribeJetson(dir.path()), IsEmpty());
}

std::string Kernel() {
  utsname uts{};
  EXPECT_EQ(uname(&uts), 0);
  return absl::StrCat(uts.sysname, " ", uts.release, " ", uts.machine);
}

TEST(DescribeOs, PrettyNameAndKernel) {
  TempDir dir;
  dir.WriteFile("etc/os-release",
                "NAME=\"Ubuntu\"\nVERSION=\"22.04.5 LTS (Jammy Jellyfish)\"\nID=ubuntu\n"
                "PRETTY_NAME=\"Ubuntu 22.04.5 LTS\"\n");
  EXPECT_EQ(DescribeOs(dir.path()), "Ubuntu 22.04.5 LTS, " + Kernel());
}

TEST(DescribeOs, NameAndVersionWithoutPrettyNameThenUsrLib) {
  TempDir dir;
  dir.WriteFile("usr/lib/os-release", "NAME='Debian GNU/Linux'\nVERSION=12\n");
  EXPECT_EQ(DescribeOs(dir.path()), "Debian GNU/Linux 12, " + Kernel());
  TempDir none;
  EXPECT_THAT(DescribeOs(none.path()), StartsWith("unknown OS, Linux "));
}

}  // namespace
}  // namespace kprof::core

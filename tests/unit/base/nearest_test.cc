#include "base/nearest.h"

#include "gtest/gtest.h"

namespace kprof::base {
namespace {

TEST(EditDistance, CountsEditsAndSwapsWithUnderscoresForHyphens) {
  EXPECT_EQ(EditDistance("repeat", "repeat"), 0u);
  EXPECT_EQ(EditDistance("repeats", "repeat"), 1u);
  EXPECT_EQ(EditDistance("cache_dir", "cache-dir"), 0u);
  EXPECT_EQ(EditDistance("nubmer", "number"), 1u);  // a swap of neighbours is one edit
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(Nearest, NamesASlipButNotAnotherWord) {
  const std::vector<std::string> options = {"--repeat", "--number", "--device", "--cache-dir",
                                            "--max-queue"};
  EXPECT_EQ(Nearest("--repeats", options), "--repeat");
  EXPECT_EQ(Nearest("--cache_dir", options), "--cache-dir");
  EXPECT_EQ(Nearest("--max-queu", options), "--max-queue");
  EXPECT_EQ(Nearest("--bogus-key", options), "");
  EXPECT_EQ(Nearest("--zzz", options), "");
  // Short words allow one edit only: "cor" is a slip of "core", "cola" another word.
  EXPECT_EQ(Nearest("cor", {"core"}), "core");
  EXPECT_EQ(Nearest("cola", {"core"}), "");
  EXPECT_EQ(Nearest("x", {}), "");
}

}  // namespace
}  // namespace kprof::base

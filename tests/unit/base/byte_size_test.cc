// Sizes as people write them, and as kprof prints them.
#include "base/byte_size.h"

#include <cstdint>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kprof::base {
namespace {

TEST(ByteSize, ReadsTheFormsPeopleWrite) {
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  for (const Case& c :
       {Case{"268435456", 268435456}, Case{"0", 0}, Case{"256 MiB", 256u << 20},
        Case{"256MiB", 256u << 20}, Case{"4G", uint64_t{4} << 30}, Case{"4 GiB", uint64_t{4} << 30},
        Case{"  64 kib ", 64 << 10}, Case{"64K", 64 << 10}, Case{"64kB", 64000},
        Case{"2 MB", 2000000}, Case{"1.5 GiB", uint64_t{3} << 29}, Case{"512 B", 512},
        Case{"1 TiB", uint64_t{1} << 40}, Case{"0.5K", 512}, Case{"1.0001 B", 1},
        Case{"18446744073709551615", UINT64_MAX}}) {
    EXPECT_EQ(ParseByteSize(c.text), std::optional<uint64_t>(c.bytes)) << c.text;
  }
}

TEST(ByteSize, RefusesWhatIsNotASize) {
  for (const char* text : {"", "MiB", "-1", "-1 MiB", "256 MiBs", "256 mb of it", "1e6", "0x10",
                           "1..5 G", "18446744073709551616", "17179869184 G", "1 XiB", "ten"}) {
    EXPECT_EQ(ParseByteSize(text), std::nullopt) << text;
  }
}

TEST(ByteSize, PrintsInTheLargestUnitReached) {
  EXPECT_EQ(FormatByteSize(0), "0 B");
  EXPECT_EQ(FormatByteSize(1023), "1023 B");
  EXPECT_EQ(FormatByteSize(1024), "1 KiB");
  EXPECT_EQ(FormatByteSize(256u << 20), "256 MiB");
  EXPECT_EQ(FormatByteSize(uint64_t{4} << 30), "4 GiB");
  EXPECT_EQ(FormatByteSize(18720), "18.3 KiB");
  EXPECT_EQ(FormatByteSize(uint64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(FormatByteSize(uint64_t{300} << 20 | 1), "300 MiB");
  // Rounding never reaches 1024 of a unit, nor four digits.
  EXPECT_EQ(FormatByteSize((uint64_t{1} << 20) - 1), "1.00 MiB");
  EXPECT_EQ(FormatByteSize(10234), "9.99 KiB");
  EXPECT_EQ(FormatByteSize(10239), "10.0 KiB");
  EXPECT_EQ(FormatByteSize(102350), "100 KiB");
  // What it prints for a whole number of its unit reads back as the same size.
  for (uint64_t bytes :
       {uint64_t{1} << 10, uint64_t{7} << 20, uint64_t{4} << 30, uint64_t{1} << 50}) {
    EXPECT_EQ(ParseByteSize(FormatByteSize(bytes)), bytes) << FormatByteSize(bytes);
  }
}

}  // namespace
}  // namespace kprof::base

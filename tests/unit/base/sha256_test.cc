#include "base/sha256.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kprof::base {
namespace {

using ::testing::HasSubstr;

TEST(Sha256Test, HashesTheReferenceVectors) {
  // FIPS 180-2's "abc", and the empty message.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 pieces;
  pieces.Update("a");
  pieces.Update("");
  pieces.Update("bc");
  EXPECT_EQ(pieces.HexDigest(), Sha256Hex("abc"));
}

TEST(HexTest, RoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string hex = ToHex(all);
  EXPECT_EQ(hex.substr(0, 8), "00010203");
  EXPECT_EQ(hex.substr(hex.size() - 4), "feff");
  const absl::StatusOr<std::string> back = FromHex(hex);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, all);
  EXPECT_EQ(FromHex("").value(), "");
}

TEST(HexTest, RefusesWhatIsNotLowercaseHexNamingIt) {
  const absl::StatusOr<std::string> odd = FromHex("abc");
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(odd.status().message()), HasSubstr("odd length 3"));
  const absl::StatusOr<std::string> upper = FromHex("00AB");
  EXPECT_EQ(upper.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(upper.status().message()), HasSubstr("'AB' at offset 2"));
  EXPECT_FALSE(FromHex("zz").ok());
}

}  // namespace
}  // namespace kprof::base

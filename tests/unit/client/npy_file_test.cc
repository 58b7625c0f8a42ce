// NumPy .npy files read as expected data: format versions, types, and the files refused.
#include "client/cli/npy_file.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::client {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A .npy file of `version` (1 or 2) with `header` (padded) and `data`.
std::string Npy(const std::string& header, const std::string& data, int version = 1) {
  std::string h = header;
  const size_t fixed = version == 1 ? 10 : 12;
  h.append(63 - (fixed + h.size()) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  for (size_t i = 0; i < (version == 1 ? 2u : 4u); ++i)
    out += static_cast<char>(h.size() >> (8 * i));
  return out + h + data;
}

TEST(NpyFile, ReadsTypeShapeAndData) {
  auto v1 = ParseNpy(
      Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", std::string(24, 'x')),
      "a.npy");
  ASSERT_THAT(v1, IsOk());
  EXPECT_EQ(v1->dtype(), "float32");
  EXPECT_THAT(v1->shape(), ElementsAre(2, 3));
  EXPECT_EQ(v1->data().size(), 24u);
  auto v2 =
      ParseNpy(Npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", "abc", 2), "b.npy");
  ASSERT_THAT(v2, IsOk());
  EXPECT_EQ(v2->dtype(), "bool");
  auto scalar =
      ParseNpy(Npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", std::string(8, '\0')),
               "c.npy");
  ASSERT_THAT(scalar, IsOk());
  EXPECT_EQ(scalar->shape_size(), 0);
}

TEST(NpyFile, RefusesWhatItCannotReadNamingWhy) {
  EXPECT_THAT(ParseNpy("hello", "x.npy").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("magic string")));
  EXPECT_THAT(
      ParseNpy(Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd"), "x.npy")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("element type '>f4'")));
  EXPECT_THAT(
      ParseNpy(Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "abcd"), "x.npy")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Fortran order")));
  EXPECT_THAT(
      ParseNpy(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "abcd"), "x.npy")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("holds 4 bytes of data where its header's 2 elements take 8")));
  EXPECT_THAT(ParseNpy(Npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                           std::string(8, 'x')),
                       "x.npy")
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'<c8' (accepted:")));
}

}  // namespace
}  // namespace kprof::client

#include "report/shape_string.h"

#include "gtest/gtest.h"

namespace kprof::report {
namespace {

TEST(ShapeString, OneTensorAsTheReferencePrintsIt) {
  EXPECT_EQ(ShapeString(TensorShape{"float32", {1, 2, 3}, ""}), "float32[1, 2, 3]");
  EXPECT_EQ(ShapeString(TensorShape{"int64", {16}, ""}), "int64[16]");
}

TEST(ShapeString, ScalarHasEmptyBracketsOrItsValue) {
  EXPECT_EQ(ShapeString(TensorShape{"float64", {}, ""}), "float64[]");
  EXPECT_EQ(ShapeString(TensorShape{"float64", {}, "100"}), "float64:100");
  EXPECT_EQ(ShapeString(TensorShape{"float64", {2}, "100"}), "float64[2]");
}

TEST(ShapeString, SeveralTensorsAreCommaJoined) {
  EXPECT_EQ(
      ShapeString({{"float32", {256, 256}, ""}, {"float32", {256, 256}, ""}, {"int32", {}, ""}}),
      "float32[256, 256], float32[256, 256], int32[]");
  EXPECT_EQ(ShapeString(std::vector<TensorShape>{}), "");
}

}  // namespace
}  // namespace kprof::report

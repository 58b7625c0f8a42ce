// The comparison of checked answers on literal arrays: numpy.allclose's rule at its edges, NaN
// and infinities, integers exactly, half types decoded, inputs bit for bit.
#include "core/check/answer_compare.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/args/data_type.h"
#include "gtest/gtest.h"

namespace kprof::core {
namespace {

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
ArgumentComparison Compare(const char* type, const std::vector<T>& got, const std::vector<T>& want,
                           Tolerance t) {
  const DLDataType dtype = *ParseDataType(type);
  const std::string g = Bytes(got), w = Bytes(want);
  const auto n = static_cast<int64_t>(got.size());
  return CompareOutput({dtype, n, g}, {dtype, n, w}, t);
}

TEST(AnswerCompare, AllcloseRuleHoldsAtItsEdgeOnEachSide) {
  // |got - expected| <= atol + rtol * |expected|: 1 + 0.1 * 10 = 2 allowed around 10.
  const Tolerance t{0.1, 1.0};
  EXPECT_EQ(Compare<double>("float64", {11.999}, {10}, t).mismatched, 0);
  EXPECT_EQ(Compare<double>("float64", {8.001}, {10}, t).mismatched, 0);
  const ArgumentComparison over = Compare<double>("float64", {12.001}, {10}, t);
  EXPECT_EQ(over.mismatched, 1);
  EXPECT_EQ(over.first_index, 0);
  EXPECT_DOUBLE_EQ(over.got, 12.001);
  EXPECT_DOUBLE_EQ(over.expected, 10);
  EXPECT_NEAR(over.max_abs_error, 2.001, 1e-12);
  EXPECT_NEAR(over.max_rel_error, 0.2001, 1e-12);
  EXPECT_EQ(Compare<float>("float32", {7.9f, 5.0f, 12.5f}, {10, 5, 10}, t).first_index, 0);
}

TEST(AnswerCompare, NanMatchesOnlyNanAndInfinityOnlyItself) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tolerance loose{1, 1};
  EXPECT_EQ(Compare<float>("float32", {nan, inf, -inf}, {nan, inf, -inf}, loose).mismatched, 0);
  EXPECT_EQ(Compare<float>("float32", {nan}, {1}, loose).mismatched, 1);
  EXPECT_EQ(Compare<float>("float32", {1}, {nan}, loose).mismatched, 1);
  EXPECT_EQ(Compare<float>("float32", {inf}, {-inf}, loose).mismatched, 1);
  EXPECT_EQ(Compare<float>("float32", {1e30f}, {inf}, loose).mismatched, 1);
  EXPECT_EQ(Compare<float>("float32", {inf}, {1e30f}, loose).mismatched, 1);
}

TEST(AnswerCompare, IntegersAndBoolAreExact) {
  EXPECT_EQ(DefaultTolerance(*ParseDataType("int32")).rtol, 0);
  const ArgumentComparison c = Compare<int32_t>("int32", {1, 2, 3, -4}, {1, 2, 4, -4},
                                                DefaultTolerance(*ParseDataType("int32")));
  EXPECT_EQ(c.mismatched, 1);
  EXPECT_EQ(c.first_index, 2);
  EXPECT_EQ(c.got, 3);
  EXPECT_EQ(c.expected, 4);
  EXPECT_EQ(Compare<uint8_t>("bool", {1, 0}, {1, 1}, {}).mismatched, 1);
  EXPECT_EQ(Compare<uint64_t>("uint64", {~uint64_t{0}}, {~uint64_t{0} - 1}, {}).mismatched, 1);
}

TEST(AnswerCompare, HalfTypesAreDecodedAndComparedByTheirDefaults) {
  const DLDataType half = *ParseDataType("float16");
  const DLDataType bf16 = *ParseDataType("bfloat16");
  EXPECT_EQ(DefaultTolerance(half).rtol, 1e-2);
  EXPECT_EQ(DefaultTolerance(*ParseDataType("float32")).atol, 1e-5);
  EXPECT_EQ(DefaultTolerance(*ParseDataType("float64")).rtol, 1e-7);
  const std::vector<uint16_t> a = {DoubleToHalf(1.0), DoubleToHalf(2.0)};
  const std::vector<uint16_t> b = {DoubleToHalf(1.005), DoubleToHalf(2.5)};
  const std::string ga = Bytes(a), gb = Bytes(b);
  const ArgumentComparison c = CompareOutput({half, 2, ga}, {half, 2, gb}, DefaultTolerance(half));
  EXPECT_EQ(c.mismatched, 1);  // 1 against 1.005 passes; 2 against 2.5 does not
  EXPECT_EQ(c.first_index, 1);
  EXPECT_DOUBLE_EQ(c.got, 2.0);
  EXPECT_DOUBLE_EQ(c.expected, 2.5);
  const std::vector<uint16_t> x = {DoubleToBfloat16(-3.0)};
  const std::string gx = Bytes(x);
  EXPECT_DOUBLE_EQ(ElementValue({bf16, 1, gx}, 0), -3.0);
}

TEST(AnswerCompare, InputsCompareBitForBit) {
  const DLDataType f32 = *ParseDataType("float32");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::string same = Bytes<float>({1, nan}), changed = Bytes<float>({1, -nan});
  EXPECT_EQ(CompareInput({f32, 2, same}, {f32, 2, same}).mismatched, 0);
  const ArgumentComparison c = CompareInput({f32, 2, changed}, {f32, 2, same});
  EXPECT_EQ(c.mismatched, 1);  // another NaN is a write
  EXPECT_EQ(c.first_index, 1);
}

}  // namespace
}  // namespace kprof::core

#include "core/args/data_type.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kprof/module_abi.h"

namespace kprof::core {
namespace {

struct NamedType {
  std::string_view name;
  DLDataType type;
};

constexpr NamedType kTypes[] = {
    {"bool", {KPROF_DL_BOOL, 8, 1}},  {"int8", {kDLInt, 8, 1}},
    {"int16", {kDLInt, 16, 1}},       {"int32", {kDLInt, 32, 1}},
    {"int64", {kDLInt, 64, 1}},       {"uint8", {kDLUInt, 8, 1}},
    {"uint16", {kDLUInt, 16, 1}},     {"uint32", {kDLUInt, 32, 1}},
    {"uint64", {kDLUInt, 64, 1}},     {"float16", {kDLFloat, 16, 1}},
    {"bfloat16", {kDLBfloat, 16, 1}}, {"float32", {kDLFloat, 32, 1}},
    {"float64", {kDLFloat, 64, 1}},
};

bool Same(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

}  // namespace

absl::StatusOr<DLDataType> ParseDataType(std::string_view name) {
  for (const NamedType& t : kTypes) {
    if (t.name == name) return t.type;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown data type '", std::string(name),
      "' (accepted: bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, "
      "bfloat16, float32, float64)"));
}

std::string DataTypeName(DLDataType type) {
  for (const NamedType& t : kTypes) {
    if (Same(t.type, type)) return std::string(t.name);
  }
  return absl::StrCat("type(code=", type.code, ", bits=", type.bits, ", lanes=", type.lanes, ")");
}

size_t ElementBytes(DLDataType type) {
  return (static_cast<size_t>(type.bits) * type.lanes + 7) / 8;
}

bool IsFloat(DLDataType type) { return type.code == kDLFloat || type.code == kDLBfloat; }
bool IsSigned(DLDataType type) { return type.code == kDLInt; }
bool IsUnsigned(DLDataType type) { return type.code == kDLUInt; }
bool IsBool(DLDataType type) { return type.code == KPROF_DL_BOOL; }

namespace {

// `value` in a binary format of 1 + exponent_bits + mantissa_bits bits (at most 16), rounded
// once from the double's exact value.
uint16_t ToNarrowFloat(double value, int exponent_bits, int mantissa_bits, bool toward_zero) {
  uint64_t x;
  std::memcpy(&x, &value, sizeof x);
  const auto sign = static_cast<uint32_t>((x >> 63) << (exponent_bits + mantissa_bits));
  const uint32_t all_ones = (1u << exponent_bits) - 1;
  const uint32_t infinity = sign | (all_ones << mantissa_bits);
  const uint32_t largest = infinity - 1;
  const auto exponent = static_cast<int32_t>((x >> 52) & 0x7FF);
  const uint64_t fraction = x & ((uint64_t{1} << 52) - 1);
  if (exponent == 0x7FF) {  // inf stays inf; NaN stays a quiet NaN
    return static_cast<uint16_t>(infinity | (fraction != 0 ? 1u << (mantissa_bits - 1) : 0u));
  }
  if (exponent == 0) return static_cast<uint16_t>(sign);  // zero, or far below the smallest
  const int32_t bias = static_cast<int32_t>(all_ones >> 1);
  const int32_t e = exponent - 1023 + bias;  // the biased exponent in the narrow format
  if (e >= static_cast<int32_t>(all_ones)) {
    return static_cast<uint16_t>(toward_zero ? largest : infinity);
  }
  // The 53-bit significand, shifted down to the narrow format's; a subnormal loses more bits.
  const uint64_t significand = fraction | (uint64_t{1} << 52);
  const int shift = 52 - mantissa_bits + (e <= 0 ? 1 - e : 0);
  if (shift >= 64) return static_cast<uint16_t>(sign);
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t halfway = uint64_t{1} << (shift - 1);
  if (!toward_zero && (rest > halfway || (rest == halfway && (kept & 1u)))) ++kept;
  // For normals, the implicit bit becomes the exponent's lowest; a carry out of the mantissa
  // bumps the exponent (up to infinity), and a subnormal rounding up becomes the least normal.
  const uint64_t bits = e <= 0 ? kept : (static_cast<uint64_t>(e - 1) << mantissa_bits) + kept;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(bits));
}

}  // namespace

uint16_t DoubleToHalf(double value, bool toward_zero) {
  return ToNarrowFloat(value, 5, 10, toward_zero);
}

uint16_t DoubleToBfloat16(double value, bool toward_zero) {
  return ToNarrowFloat(value, 8, 7, toward_zero);
}

double LargestFinite(DLDataType type) {
  if (type.code == kDLBfloat && type.bits == 16) return 0x1.FEp127;
  if (type.code != kDLFloat) return 0;
  switch (type.bits) {
    case 16:
      return 65504;
    case 32:
      return std::numeric_limits<float>::max();
    case 64:
      return std::numeric_limits<double>::max();
    default:
      return 0;
  }
}

bool FitsFloatType(DLDataType type, double value) {
  if (!std::isfinite(value)) return false;
  if (type.code == kDLBfloat) return (DoubleToBfloat16(value) & 0x7F80u) != 0x7F80u;
  switch (type.bits) {
    case 16:
      return (DoubleToHalf(value) & 0x7C00u) != 0x7C00u;
    case 32:
      return std::isfinite(static_cast<float>(value));
    default:
      return true;
  }
}

}  // namespace kprof::core

#include "core/args/data_type.h"

#include <cstring>

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

uint16_t FloatToHalf(float value, bool toward_zero) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t exponent = (x >> 23) & 0xFFu;
  uint32_t mantissa = x & 0x7FFFFFu;
  if (exponent == 0xFF) {  // inf stays inf; NaN stays a quiet NaN
    return static_cast<uint16_t>(sign | 0x7C00u | (mantissa != 0 ? 0x200u : 0u));
  }
  const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | (toward_zero ? 0x7BFFu : 0x7C00u));
  if (e <= 0) {  // a half subnormal, or zero
    if (e < -10) return sign;
    mantissa |= 0x800000u;
    const auto shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (!toward_zero && (rest > halfway || (rest == halfway && (half & 1u)))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1FFFu;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  if (!toward_zero && (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))) ++half;
  return static_cast<uint16_t>(half);
}

uint16_t FloatToBfloat16(float value, bool toward_zero) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu) != 0) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // a quiet NaN
  }
  if (!toward_zero) x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace kprof::core

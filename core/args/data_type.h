// Element types of arguments: their names in specs and reports, and their DLPack codes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "dlpack/dlpack.h"

namespace kprof::core {

// bool, int8/16/32/64, uint8/16/32/64, float16, bfloat16, float32, float64. bool is DLPack
// code 6 (kDLBool in later DLPack versions), 8 bits.
absl::StatusOr<DLDataType> ParseDataType(std::string_view name);

// The name ParseDataType reads: "float32", "bool", ...
std::string DataTypeName(DLDataType type);

// Bytes per element (bool takes one).
size_t ElementBytes(DLDataType type);

bool IsFloat(DLDataType type);     // float16, bfloat16, float32, float64
bool IsSigned(DLDataType type);    // int8..int64
bool IsUnsigned(DLDataType type);  // uint8..uint64
bool IsBool(DLDataType type);

// IEEE half and bfloat16 from a double (or a float, which converts exactly), rounded once: to
// nearest even, or toward zero. Values beyond the largest finite one round to infinity (toward
// zero: to the largest finite one); NaN stays a quiet NaN.
uint16_t DoubleToHalf(double value, bool toward_zero = false);
uint16_t DoubleToBfloat16(double value, bool toward_zero = false);
inline uint16_t FloatToHalf(float value, bool toward_zero = false) {
  return DoubleToHalf(value, toward_zero);
}
inline uint16_t FloatToBfloat16(float value, bool toward_zero = false) {
  return DoubleToBfloat16(value, toward_zero);
}

// A float type's largest finite value (65504 for float16); 0 for other types.
double LargestFinite(DLDataType type);

// Whether finite `value` stays finite when stored as float `type` (rounded to nearest).
bool FitsFloatType(DLDataType type, double value);

}  // namespace kprof::core

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

// IEEE half and bfloat16 from a float, rounding to nearest even or toward zero.
uint16_t FloatToHalf(float value, bool toward_zero = false);
uint16_t FloatToBfloat16(float value, bool toward_zero = false);

}  // namespace kprof::core

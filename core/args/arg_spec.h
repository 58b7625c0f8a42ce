// Argument specs: the text a person types for each argument of a measured function, and what it
// means — a typed tensor of some shape and how to initialise it.
//
//   float32[1024, 1024]:random    int32[16]:zeros    float64[8]:ones    int64[4]:arange
//   float32[4]:fill:0.5           float32:2.5 (a scalar)                 int64:7
//
// Grammar: DTYPE [ '[' DIM (',' DIM)* ']' ] [ ':' INIT ], where INIT is zeros, ones, random,
// arange, fill:VALUE or a bare VALUE (a fill; `float32:2.5` is a 0-d tensor holding 2.5). No
// shape means a scalar (0-d tensor), `[]` too; no INIT means zeros. Spaces may follow commas.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dlpack/dlpack.h"
#include "report/shape_string.h"

namespace kprof::core {

enum class ArgInit { kZeros, kOnes, kRandom, kArange, kFill };

// A fill value, held in the form that represents it exactly for the spec's type.
struct FillValue {
  double real = 0;      // float types
  int64_t integer = 0;  // signed types and bool (0 or 1)
  uint64_t unsigned_integer = 0;
};

struct ArgSpec {
  std::string text;  // the spec as written
  DLDataType dtype{};
  std::vector<int64_t> shape;  // empty for a scalar
  ArgInit init = ArgInit::kZeros;
  FillValue fill;
  int64_t num_elements = 1;
  uint64_t num_bytes = 0;
};

inline constexpr int kMaxDimensions = 32;

// Parses one spec. INVALID_ARGUMENT quotes the spec and the column (1-based) of the error:
// "argument spec 'float32[4,x]': column 11: expected a dimension (a non-negative integer)".
// Element counts and byte sizes that overflow 63 bits are errors too.
absl::StatusOr<ArgSpec> ParseArgSpec(std::string_view text);

// "float32[1024, 1024]", or a scalar's value "int64:7" — for "Argument Shapes".
report::TensorShape ShapeOf(const ArgSpec& spec);

}  // namespace kprof::core

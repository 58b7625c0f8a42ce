// Comparing a function's arguments after a call with what they should hold: outputs within a
// tolerance (numpy.allclose's rule), inputs bit for bit. Pure functions over bytes, so that the
// daemon's front compares what a worker sent out, and tests check literal arrays.
//
//   ArgumentView got{dtype, n, bytes_from_worker}, want{dtype, n, reference_bytes};
//   ArgumentComparison c = CompareOutput(got, want, DefaultTolerance(dtype));
//   if (c.mismatched > 0) ...  // c.first_index, c.got, c.expected, c.max_abs_error
#pragma once

#include <cstdint>
#include <string_view>

#include "dlpack/dlpack.h"

namespace kprof::core {

// |got - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// The defaults per element type: float16 and bfloat16 1e-2, 1e-2 (KernelBench's); float32
// 1e-4, 1e-5; float64 1e-7, 1e-8; exact (0, 0) for integers and bool.
Tolerance DefaultTolerance(DLDataType type);

// One argument's elements: `bytes` holds `elements` of `type`, little-endian, C order.
struct ArgumentView {
  DLDataType type{};
  int64_t elements = 0;
  std::string_view bytes;
};

struct ArgumentComparison {
  int64_t elements = 0;
  int64_t mismatched = 0;
  int64_t first_index = -1;  // -1: none differs
  double got = 0;            // at first_index
  double expected = 0;
  // Over every element (relative: of those whose expected value is not 0); NaN and infinite
  // differences are left out of them (a mismatch all the same where the rule says so).
  double max_abs_error = 0;
  double max_rel_error = 0;
};

// An output against the reference's: floats by the tolerance (NaN matches NaN only, an
// infinity only the same infinity), integers and bool exactly. `got` and `expected` must have
// the same type and element count.
ArgumentComparison CompareOutput(const ArgumentView& got, const ArgumentView& expected,
                                 Tolerance tolerance);

// An input against its initial bytes: each element bit for bit (a NaN rewritten as another NaN
// counts as written).
ArgumentComparison CompareInput(const ArgumentView& got, const ArgumentView& original);

// Element `index` of `view` as a double (for messages and errors).
double ElementValue(const ArgumentView& view, int64_t index);

}  // namespace kprof::core

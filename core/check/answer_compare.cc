#include "core/check/answer_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/args/data_type.h"

namespace kprof::core {
namespace {

double HalfToDouble(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value;
  if (exponent == 0) {
    value = std::ldexp(mantissa, -24);
  } else if (exponent == 0x1f) {
    value = mantissa == 0 ? std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
  } else {
    value = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign != 0 ? -value : value;
}

double Bfloat16ToDouble(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

// Loads element i of a float view as a double.
double FloatAt(const ArgumentView& v, int64_t i) {
  const char* p = v.bytes.data() + i * (v.type.bits / 8);
  switch (v.type.bits) {
    case 16:
      return v.type.code == kDLBfloat ? Bfloat16ToDouble(Load<uint16_t>(p))
                                      : HalfToDouble(Load<uint16_t>(p));
    case 32:
      return Load<float>(p);
    default:
      return Load<double>(p);
  }
}

void NoteError(double abs_error, double expected, ArgumentComparison& c) {
  if (!std::isfinite(abs_error)) return;
  if (abs_error > c.max_abs_error) c.max_abs_error = abs_error;
  if (expected != 0) {
    const double rel = abs_error / std::fabs(expected);
    if (rel > c.max_rel_error) c.max_rel_error = rel;
  }
}

void NoteMismatch(const ArgumentView& got, const ArgumentView& expected, int64_t i,
                  ArgumentComparison& c) {
  if (c.mismatched++ == 0) {
    c.first_index = i;
    c.got = ElementValue(got, i);
    c.expected = ElementValue(expected, i);
  }
}

bool FloatsMatch(double g, double e, Tolerance t) {
  if (std::isnan(e) || std::isnan(g)) return std::isnan(e) && std::isnan(g);
  if (std::isinf(e) || std::isinf(g)) return g == e;
  return std::fabs(g - e) <= t.atol + t.rtol * std::fabs(e);
}

// The float32 and float64 loop, without a branch on the type per element: one pass for the
// largest errors and the mismatches. The largest errors live in locals while the elements
// match (a reference's fields would keep them in memory: a load and a store per element).
constexpr double kInfinity = std::numeric_limits<double>::infinity();

template <typename T>
void CompareFloats(const ArgumentView& got, const ArgumentView& expected, Tolerance t,
                   ArgumentComparison& c) {
  const char* g = got.bytes.data();
  const char* e = expected.bytes.data();
  double max_abs = c.max_abs_error, max_rel = c.max_rel_error;
  for (int64_t i = 0; i < got.elements; ++i) {
    const double gv = Load<T>(g + i * static_cast<int64_t>(sizeof(T)));
    const double ev = Load<T>(e + i * static_cast<int64_t>(sizeof(T)));
    const double error = std::fabs(gv - ev), magnitude = std::fabs(ev);
    // Within the tolerance and finite: false for a NaN on either side, and for an infinity
    // (an expected one would otherwise allow anything).
    if (error <= t.atol + t.rtol * magnitude && error < kInfinity) [[likely]] {
      max_abs = std::max(max_abs, error);
      if (error > max_rel * magnitude && magnitude != 0) max_rel = error / magnitude;
      continue;
    }
    c.max_abs_error = max_abs;
    c.max_rel_error = max_rel;
    NoteError(error, ev, c);
    if (!FloatsMatch(gv, ev, t)) NoteMismatch(got, expected, i, c);
    max_abs = c.max_abs_error;
    max_rel = c.max_rel_error;
  }
  c.max_abs_error = max_abs;
  c.max_rel_error = max_rel;
}

}  // namespace

Tolerance DefaultTolerance(DLDataType type) {
  if (!IsFloat(type)) return {0, 0};
  switch (type.bits) {
    case 16:
      return {1e-2, 1e-2};
    case 32:
      return {1e-4, 1e-5};
    default:
      return {1e-7, 1e-8};
  }
}

double ElementValue(const ArgumentView& view, int64_t index) {
  if (IsFloat(view.type)) return FloatAt(view, index);
  const size_t width = ElementBytes(view.type);
  const char* p = view.bytes.data() + index * static_cast<int64_t>(width);
  if (IsSigned(view.type)) {
    switch (width) {
      case 1:
        return Load<int8_t>(p);
      case 2:
        return Load<int16_t>(p);
      case 4:
        return Load<int32_t>(p);
      default:
        return static_cast<double>(Load<int64_t>(p));
    }
  }
  switch (width) {
    case 1:
      return Load<uint8_t>(p);
    case 2:
      return Load<uint16_t>(p);
    case 4:
      return Load<uint32_t>(p);
    default:
      return static_cast<double>(Load<uint64_t>(p));
  }
}

ArgumentComparison CompareOutput(const ArgumentView& got, const ArgumentView& expected,
                                 Tolerance tolerance) {
  if (!IsFloat(got.type)) return CompareInput(got, expected);  // exact: element bit for bit
  ArgumentComparison c;
  c.elements = got.elements;
  switch (got.type.bits) {
    case 32:
      CompareFloats<float>(got, expected, tolerance, c);
      break;
    case 64:
      CompareFloats<double>(got, expected, tolerance, c);
      break;
    default:
      for (int64_t i = 0; i < got.elements; ++i) {
        const double g = FloatAt(got, i), e = FloatAt(expected, i);
        NoteError(std::fabs(g - e), e, c);
        if (!FloatsMatch(g, e, tolerance)) NoteMismatch(got, expected, i, c);
      }
  }
  return c;
}

ArgumentComparison CompareInput(const ArgumentView& got, const ArgumentView& original) {
  ArgumentComparison c;
  c.elements = got.elements;
  if (got.bytes == original.bytes) return c;  // the common case, at memcmp's speed
  const size_t width = ElementBytes(got.type);
  for (int64_t i = 0; i < got.elements; ++i) {
    const size_t at = static_cast<size_t>(i) * width;
    if (std::memcmp(got.bytes.data() + at, original.bytes.data() + at, width) != 0) {
      NoteMismatch(got, original, i, c);
      NoteError(std::fabs(ElementValue(got, i) - ElementValue(original, i)),
                ElementValue(original, i), c);
    }
  }
  return c;
}

}  // namespace kprof::core

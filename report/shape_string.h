// "Argument Shapes" text for a report: `float32[1, 2, 3]`, comma-joined for several tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kprof::report {

struct TensorShape {
  std::string dtype;           // "float32", "int64", ...
  std::vector<int64_t> shape;  // empty for a scalar (a 0-d tensor)
  std::string value;           // a scalar's value, when it is known ("100"); "" otherwise
};

// `float32[1024, 1024]`; a scalar is `float64:100` when its value is known (so that two
// measurements that differ only in a scalar read apart), else `float32[]`.
std::string ShapeString(const TensorShape& tensor);

// `float32[16], int64[]`: each tensor's ShapeString, joined with ", ".
std::string ShapeString(const std::vector<TensorShape>& tensors);

}  // namespace kprof::report

#include "report/shape_string.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kprof::report {

std::string ShapeString(const TensorShape& tensor) {
  if (tensor.shape.empty() && !tensor.value.empty())
    return absl::StrCat(tensor.dtype, ":", tensor.value);
  return absl::StrCat(tensor.dtype, "[", absl::StrJoin(tensor.shape, ", "), "]");
}

std::string ShapeString(const std::vector<TensorShape>& tensors) {
  return absl::StrJoin(tensors, ", ", [](std::string* out, const TensorShape& tensor) {
    out->append(ShapeString(tensor));
  });
}

}  // namespace kprof::report

#include "core/modules/module.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kprof::core {

absl::Status NoSuchFunction(std::string_view name, const std::vector<std::string>& exports) {
  constexpr size_t kListed = 8;
  const size_t shown = std::min(exports.size(), kListed);
  std::string listed = absl::StrJoin(exports.begin(), exports.begin() + shown, ", ");
  if (shown < exports.size()) absl::StrAppend(&listed, ", and ", exports.size() - shown, " more");
  if (exports.empty()) listed = "nothing";
  return absl::NotFoundError(absl::StrCat("module holds no function '", std::string(name),
                                          "' (it exports: ", listed, ")"));
}

}  // namespace kprof::core

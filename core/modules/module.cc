#include "core/modules/module.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/nearest.h"

namespace kprof::core {

absl::Status NoSuchFunction(std::string_view name, const std::vector<std::string>& exports) {
  constexpr size_t kListed = 8;
  const size_t shown = std::min(exports.size(), kListed);
  std::string listed = absl::StrJoin(exports.begin(), exports.begin() + shown, ", ");
  if (shown < exports.size()) absl::StrAppend(&listed, ", and ", exports.size() - shown, " more");
  if (exports.empty()) listed = "nothing";
  // A C++ function exported under its mangled name ("_Z8my_saxpyP8DLTensori"): the fix is the
  // declaration's, not the call's.
  const std::string itanium = absl::StrCat(name.size(), std::string(name));
  for (const std::string& e : exports) {
    if (e.rfind("_Z", 0) == 0 && e.find(itanium) != std::string::npos) {
      return absl::NotFoundError(absl::StrCat(
          "module holds no function '", std::string(name), "', but the C++ function '", e,
          "': declare it extern \"C\" (KPROF_EXPORT in kprof/module_abi.h does) so that it "
          "is exported by its own name (it exports: ",
          listed, ")"));
    }
  }
  const std::string near = base::Nearest(name, exports);
  return absl::NotFoundError(absl::StrCat("module holds no function '", std::string(name), "' (",
                                          near.empty() ? "" : "did you mean '" + near + "'? ",
                                          "it exports: ", listed, ")"));
}

}  // namespace kprof::core

// SharedLibraryModule: an uploaded ELF module, loaded with dlopen — only ever in a worker
// process, since loading runs the module's constructors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/modules/module.h"

namespace kprof::core {

class SharedLibraryModule final : public Module {
 public:
  // Loads the module readable through descriptor `fd` (a sealed memfd or a read-only file;
  // not closed here). The bytes are inspected first (InspectSharedLibrary's errors), then
  // dlopen'ed with RTLD_NOW | RTLD_LOCAL; a dlopen failure (missing dependency, undefined
  // symbol) is INVALID_ARGUMENT with dlerror's text.
  static absl::StatusOr<std::unique_ptr<SharedLibraryModule>> OpenDescriptor(int fd);

  // The same for a file on disk.
  static absl::StatusOr<std::unique_ptr<SharedLibraryModule>> OpenFile(const std::string& path);

  ~SharedLibraryModule() override;  // dlclose

  const std::vector<std::string>& functions() const override { return functions_; }
  absl::StatusOr<ModuleFunction> GetFunction(std::string_view name) const override;

 private:
  SharedLibraryModule(void* handle, std::vector<std::string> functions)
      : handle_(handle), functions_(std::move(functions)) {}

  void* handle_;
  std::vector<std::string> functions_;
};

}  // namespace kprof::core

// SharedLibraryModule: an uploaded ELF module, loaded with dlopen — only ever in a worker
// process, since loading runs the module's constructors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/modules/module.h"

namespace kprof::core {

struct RetainedImage;  // an image the loader kept after its module closed

class SharedLibraryModule final : public Module {
 public:
  // Loads the module whose bytes are readable through `fd` (not closed here). The bytes are
  // inspected first (InspectSharedLibrary's errors), then copied into a sealed memfd of the
  // module's own and dlopen'ed from it with RTLD_NOW | RTLD_LOCAL: every load is a new image,
  // known to the loader by the name of a descriptor the module keeps open, so no two modules
  // ever share an image (nor its code and state), whatever they export. A dlopen failure
  // (missing dependency, undefined symbol) is INVALID_ARGUMENT with dlerror's text.
  static absl::StatusOr<std::unique_ptr<SharedLibraryModule>> OpenDescriptor(int fd);

  // The same for a file on disk, and for bytes in memory.
  static absl::StatusOr<std::unique_ptr<SharedLibraryModule>> OpenFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<SharedLibraryModule>> Load(const std::string& bytes);

  ~SharedLibraryModule() override;  // dlclose, then the descriptor

  const std::vector<std::string>& functions() const override { return functions_; }
  absl::StatusOr<ModuleFunction> GetFunction(std::string_view name) const override;

 private:
  SharedLibraryModule(void* handle, int fd, std::vector<std::string> functions,
                      RetainedImage* retained, std::string soname = {})
      : handle_(handle),
        fd_(fd),
        functions_(std::move(functions)),
        retained_(retained),
        soname_(std::move(soname)) {}

  void* handle_;
  int fd_;  // the image's memfd, by whose /proc name the loader knows it; open while it is loaded
  std::vector<std::string> functions_;
  RetainedImage* retained_;  // the kept image this module took again, or null
  std::string soname_;
};

}  // namespace kprof::core

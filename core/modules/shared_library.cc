#include "core/modules/shared_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/modules/elf_inspector.h"

namespace kprof::core {
namespace {

// Reads the whole of `fd` from offset 0 (pread: the descriptor's offset is left alone).
absl::StatusOr<std::string> ReadAll(int fd) {
  std::string bytes;
  char buffer[1 << 16];
  for (off_t offset = 0;;) {
    const ssize_t n = pread(fd, buffer, sizeof buffer, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read the module: ", std::strerror(errno)));
    }
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedLibraryModule>> SharedLibraryModule::OpenDescriptor(int fd) {
  absl::StatusOr<std::string> bytes = ReadAll(fd);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<SharedLibraryInfo> info = InspectSharedLibrary(*bytes);
  if (!info.ok()) return info.status();

  // The loader opens the descriptor by its /proc path; a memfd has no other name.
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load the module: ", error != nullptr ? error : "dlopen failed"));
  }
  return std::unique_ptr<SharedLibraryModule>(
      new SharedLibraryModule(handle, std::move(info->functions)));
}

absl::StatusOr<std::unique_ptr<SharedLibraryModule>> SharedLibraryModule::OpenFile(
    const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot open module file '", path, "': ", std::strerror(errno)));
  }
  auto module = OpenDescriptor(fd);
  close(fd);
  return module;
}

SharedLibraryModule::~SharedLibraryModule() { dlclose(handle_); }

absl::StatusOr<ModuleFunction> SharedLibraryModule::GetFunction(std::string_view name) const {
  if (!std::binary_search(functions_.begin(), functions_.end(), name)) {
    return NoSuchFunction(name, functions_);
  }
  dlerror();
  void* symbol = dlsym(handle_, std::string(name).c_str());
  if (symbol == nullptr) {
    const char* error = dlerror();
    return absl::NotFoundError(absl::StrCat("cannot resolve function '", std::string(name),
                                            "': ", error != nullptr ? error : "no address"));
  }
  ModuleFunction function;
  function.name = std::string(name);
  function.function = reinterpret_cast<KprofFunction>(symbol);
  return function;
}

}  // namespace kprof::core

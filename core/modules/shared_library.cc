#include "core/modules/shared_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
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

std::string ProcPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

// MFD_EXEC (Linux 6.3): an executable memfd even where vm.memfd_noexec makes them noexec by
// default. Older kernels refuse the flag, and their memfds are executable anyway.
constexpr unsigned kMfdExec = 0x0010U;

// A sealed memfd holding `bytes`: the image's own file, a new inode for every load.
absl::StatusOr<int> SealedCopy(const std::string& bytes) {
  int fd = memfd_create("kprof-module", MFD_CLOEXEC | MFD_ALLOW_SEALING | kMfdExec);
  if (fd < 0 && errno == EINVAL) fd = memfd_create("kprof-module", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot make the module's image file (memfd): ", std::strerror(errno)));
  }
  for (size_t written = 0; written < bytes.size();) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot write the module's image file: ", std::strerror(error)));
    }
    written += static_cast<size_t>(n);
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    const int error = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("cannot seal the module's image file: ",
                                            std::strerror(error)));
  }
  return fd;
}

// The name the loader keeps for the image behind `handle` (its link map's l_name).
std::string LoadedName(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) {
    return "";
  }
  return map->l_name;
}

// The image the loader holds under the name `path`, or null. (The loader also matches by the
// file's device and inode, and then adds `path` to that image's names; a new memfd's inode
// matches no image, so asking adds nothing.)
void* HeldUnder(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  dlerror();
  return handle;
}

// How many descriptor numbers a load passes over, looking for a name no image holds.
constexpr int kMaxNameTries = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<SharedLibraryModule>> SharedLibraryModule::Load(
    const std::string& bytes) {
  absl::StatusOr<SharedLibraryInfo> info = InspectSharedLibrary(bytes);
  if (!info.ok()) return info.status();

  // The loader knows an image by the name it was opened by, and answers a dlopen of a name it
  // holds with that image, whatever file the name leads to now; and by the file's inode. So the
  // image is loaded from a file of its own (the inspected bytes, sealed: a new inode) under the
  // name of a descriptor the module keeps open for as long as the image may be loaded — no
  // other module can be handed this image, nor this module another's.
  absl::StatusOr<int> copy = SealedCopy(bytes);
  if (!copy.ok()) return copy.status();
  int fd = *copy;
  std::string path = ProcPath(fd);
  // A name may still be held by an image loaded by someone else's dlopen of a /proc path: such
  // a descriptor number is passed over, and kept open so that it stays that image's.
  for (int tries = 0; void* held = HeldUnder(path); ++tries) {
    dlclose(held);
    const int next = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (next < 0 || tries + 1 == kMaxNameTries) {
      if (next >= 0) close(next);
      return absl::ResourceExhaustedError(
          absl::StrCat("no free name for the module: the loader holds an image named ", path));
    }
    fd = next;
    path = ProcPath(fd);
  }

  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load the module: ", error != nullptr ? error : "dlopen failed"));
  }
  if (const std::string loaded_name = LoadedName(handle); loaded_name != path) {
    // Not a new image: never run it as this module.
    dlclose(handle);
    close(fd);
    return absl::InternalError(absl::StrCat("the loader gave the module the image loaded as '",
                                            loaded_name, "', not a new one from ", path));
  }
  return std::unique_ptr<SharedLibraryModule>(
      new SharedLibraryModule(handle, fd, std::move(info->functions)));
}

absl::StatusOr<std::unique_ptr<SharedLibraryModule>> SharedLibraryModule::OpenDescriptor(int fd) {
  absl::StatusOr<std::string> bytes = ReadAll(fd);
  if (!bytes.ok()) return bytes.status();
  return Load(*bytes);
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

SharedLibraryModule::~SharedLibraryModule() {
  dlclose(handle_);
  // An image the loader keeps after dlclose (linked nodelete, or holding a unique symbol)
  // still answers to its name: the descriptor stays open so that no later module is given it.
  if (void* still = HeldUnder(ProcPath(fd_)); still != nullptr) {
    dlclose(still);
    return;
  }
  close(fd_);
}

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

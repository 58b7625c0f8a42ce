#include "core/modules/shared_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/read_file.h"
#include "core/modules/elf_inspector.h"

namespace kprof::core {

// An image the loader kept after its module closed, by the bytes it was loaded from and the
// descriptor whose name it answers to.
struct RetainedImage {
  std::string bytes;
  int fd = -1;
  bool in_use = false;  // a module took it again
};

namespace {

std::string ProcPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

// MFD_EXEC (Linux 6.3): an executable memfd even where vm.memfd_noexec makes them noexec by
// default. Older kernels refuse the flag, and their memfds are executable anyway.
constexpr unsigned kMfdExec = 0x0010U;

// A sealed memfd holding `bytes`: the image's own file, a new inode for every load.
absl::StatusOr<int> SealedCopy(const std::string& bytes) {
  int fd = memfd_create("kprof-module", MFD_CLOEXEC | MFD_ALLOW_SEALING | kMfdExec);
  if (fd < 0 && errno == EINVAL) fd = memfd_create("kprof-module", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 && errno == EACCES) {
    return absl::FailedPreconditionError(
        "cannot make the module's image file: this host refuses executable memfds "
        "(vm.memfd_noexec = 2); kprofd-worker loads modules from one (accepted: "
        "vm.memfd_noexec 0 or 1)");
  }
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
    return absl::InternalError(
        absl::StrCat("cannot seal the module's image file: ", std::strerror(error)));
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

// Keeps descriptor number `fd` open for good, on a placeholder ("/", O_PATH) rather than the
// file it held: an image the loader keeps answers to its name.
void Reserve(int fd) {
  const int placeholder = open("/", O_PATH | O_CLOEXEC);
  if (placeholder < 0) return;  // then `fd` itself stays open: reserved all the same
  dup3(placeholder, fd, O_CLOEXEC);
  close(placeholder);
}

// What this process knows of the module images it loaded: the SONAMEs of those still loaded
// (a later module needing one would be linked to that module's code), and the images the
// loader kept after their module closed (nodelete), for a later load of the same bytes.
struct Images {
  absl::Mutex mutex;
  std::multiset<std::string> sonames ABSL_GUARDED_BY(mutex);
  std::list<RetainedImage> retained ABSL_GUARDED_BY(mutex);
};
Images& LoadedImages() {
  static Images* const images = new Images();
  return *images;
}

// A module's dependencies must be the host's libraries: not another module (by the SONAME it
// declared, which the loader matches whatever RTLD_LOCAL says), nor a descriptor's name.
absl::Status CheckDependencies(const SharedLibraryInfo& info) {
  Images& images = LoadedImages();
  absl::MutexLock lock(&images.mutex);
  for (const std::string& needed : info.needed) {
    if (needed.rfind("/proc/", 0) == 0 || needed.rfind("/dev/fd/", 0) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the module needs '", needed, "', a descriptor's name (accepted: the host's libraries)"));
    }
    if (images.sonames.count(needed) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the module needs '", needed,
          "', the SONAME of another module loaded in this worker: it would run that module's "
          "code (accepted: the host's libraries)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedLibraryModule>> SharedLibraryModule::Load(
    const std::string& bytes) {
  absl::StatusOr<SharedLibraryInfo> info = InspectSharedLibrary(bytes);
  if (!info.ok()) return info.status();
  if (absl::Status s = CheckDependencies(*info); !s.ok()) return s;

  // The same bytes as an image the loader kept after its module closed: that image is this
  // module (and a new copy of it would be kept as well, one more for every load).
  {
    Images& images = LoadedImages();
    absl::MutexLock lock(&images.mutex);
    for (RetainedImage& r : images.retained) {
      if (r.in_use || r.bytes != bytes) continue;
      const std::string path = ProcPath(r.fd);
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) break;
      if (LoadedName(handle) != path) {
        dlclose(handle);
        break;
      }
      r.in_use = true;
      return std::unique_ptr<SharedLibraryModule>(
          new SharedLibraryModule(handle, r.fd, std::move(info->functions), &r));
    }
  }

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
    const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);  // the memfd, under another number
    Reserve(fd);
    if (moved < 0 || tries + 1 == kMaxNameTries) {
      if (moved >= 0) close(moved);
      return absl::ResourceExhaustedError(
          absl::StrCat("no free name for the module: the loader holds an image named ", path));
    }
    fd = moved;
    path = ProcPath(fd);
  }

  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    std::string why = error != nullptr ? error : "dlopen failed";
    // The loader names the image by its descriptor, which means nothing to the module's author.
    if (absl::StartsWith(why, path + ": ")) why = why.substr(path.size() + 2);
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("cannot load the module: ", why));
  }
  if (const std::string loaded_name = LoadedName(handle); loaded_name != path) {
    // Not a new image: never run it as this module.
    dlclose(handle);
    close(fd);
    return absl::InternalError(absl::StrCat("the loader gave the module the image loaded as '",
                                            loaded_name, "', not a new one from ", path));
  }
  if (!info->soname.empty()) {
    Images& images = LoadedImages();
    absl::MutexLock lock(&images.mutex);
    images.sonames.insert(info->soname);
  }
  return std::unique_ptr<SharedLibraryModule>(
      new SharedLibraryModule(handle, fd, std::move(info->functions), nullptr, info->soname));
}

absl::StatusOr<std::unique_ptr<SharedLibraryModule>> SharedLibraryModule::OpenDescriptor(int fd) {
  absl::StatusOr<std::string> bytes = base::ReadDescriptor(fd);
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
  Images& images = LoadedImages();
  absl::MutexLock lock(&images.mutex);
  if (retained_ != nullptr) {  // a kept image, kept on
    retained_->in_use = false;
    return;
  }
  // An image the loader keeps after dlclose (linked nodelete) still answers to its name, and
  // still declares its SONAME: its descriptor stays open so that no later module is given it,
  // and a later load of the same bytes takes it again.
  if (void* still = HeldUnder(ProcPath(fd_)); still != nullptr) {
    dlclose(still);
    if (absl::StatusOr<std::string> bytes = base::ReadDescriptor(fd_); bytes.ok()) {
      images.retained.push_back(RetainedImage{*std::move(bytes), fd_, false});
    }
    return;
  }
  close(fd_);
  if (!soname_.empty()) {
    if (auto it = images.sonames.find(soname_); it != images.sonames.end()) {
      images.sonames.erase(it);
    }
  }
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

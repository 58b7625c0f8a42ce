#include "server/front/modules/module_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/byte_size.h"
#include "base/log.h"
#include "base/read_file.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "core/modules/elf_inspector.h"
#include "core/modules/module_format.h"
#include "nlohmann/json.hpp"
#include "proto/status.h"
#include "server/front/modules/cache_files.h"

namespace kprof::server {

using cache_files::CheckExports;
using cache_files::Commit;
using cache_files::ErrnoError;
using cache_files::IsModuleId;

absl::Status ModuleRegistry::CheckHeader(const std::string& name, const std::string& format,
                                         uint64_t size_bytes, const std::string& sha256) const {
  constexpr size_t kMaxName = 256;
  if (name.size() > kMaxName) {
    return absl::InvalidArgumentError(
        absl::StrCat("module name of ", name.size(), " bytes (limit ", kMaxName, ")"));
  }
  if (!core::IsPrintableUtf8(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("module name ", core::QuoteBytes(name),
                     " is not printable UTF-8 (accepted: UTF-8 without control characters)"));
  }
  if (!core::IsModuleFormat(format)) {
    return absl::InvalidArgumentError(
        absl::StrCat("module format '", format,
                     "' is unknown (accepted: auto, shared-library, cubin, fatbin, ptx)"));
  }
  if (size_bytes > options_.max_module_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a module of ", base::FormatByteSize(size_bytes), " (", size_bytes,
                     " bytes) is over the limit of ",
                     base::FormatByteSize(options_.max_module_bytes), " (--max-module-bytes)"));
  }
  if (!IsModuleId(sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sha256 '", sha256, "' is not a SHA-256 in lowercase hex (64 digits 0-9a-f)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModuleRegistry::StoreResult> ModuleRegistry::Store(
    const std::string& client, const std::string& name, const std::string& format, Upload& upload,
    uint64_t declared_size, const std::string& declared_sha256, const std::string& actual_sha256) {
  KPROF_RETURN_IF_ERROR(CheckHeader(name, format, declared_size, declared_sha256));
  if (upload.size() != declared_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "upload of ", upload.size(), " bytes does not match the declared size of ", declared_size));
  }
  if (actual_sha256 != declared_sha256) {
    return absl::InvalidArgumentError(absl::StrCat("upload's SHA-256 is ", actual_sha256,
                                                   ", not the declared ", declared_sha256));
  }
  // Bytes already held were described when they came; a declared format must still agree.
  const auto held = [&](Entry& entry) -> absl::StatusOr<StoreResult> {
    mutex_.AssertHeld();  // called under the lock (and so the analysis knows)
    if (!format.empty() && format != "auto" && format != entry.module.format) {
      return absl::InvalidArgumentError(
          absl::StrCat("declared ", format, ", but the bytes are ", entry.module.format));
    }
    entry.last_used = ++clock_;
    // Held already by this client; that another holds the bytes is not this client's to know.
    const bool mine = entry.holders.count(client) > 0;
    Hold(entry, client);
    return StoreResult{entry.module, mine};
  };
  // The bytes as they lie in the file (mapped, not read: a 256 MiB module costs page cache, not
  // the daemon's heap), described outside the lock, so lookups and jobs go on meanwhile; only
  // the rename into place is under it.
  const uint64_t size = upload.size();
  const auto describe = [&]() -> absl::StatusOr<core::ModuleDescription> {
    void* mapped = nullptr;
    if (size > 0) {
      mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, upload.fd_, 0);
      if (mapped == MAP_FAILED) return ErrnoError("cannot map", upload.path_);
    }
    absl::StatusOr<core::ModuleDescription> described = core::DescribeModule(
        std::string_view(static_cast<const char*>(mapped), static_cast<size_t>(size)), format);
    if (mapped != nullptr) munmap(mapped, size);
    return described;
  };
  bool held_by_others = false;
  {
    absl::MutexLock lock(&mutex_);
    ++uploads_;
    upload_bytes_ += size;
    if (auto it = entries_.find(actual_sha256); it != entries_.end()) {
      if (!Intact(it->second)) {
        DropDamaged(it);  // written again below
      } else if (it->second.holders.count(client) > 0) {
        return held(it->second);
      } else {
        held_by_others = true;
      }
    }
  }
  // Bytes another client holds cost this client the same work as new ones (the description),
  // so that how soon the answer comes does not tell it that someone holds them.
  absl::StatusOr<core::ModuleDescription> described = describe();
  if (held_by_others) {
    absl::MutexLock lock(&mutex_);
    if (auto it = entries_.find(actual_sha256); it != entries_.end()) return held(it->second);
  }
  KPROF_RETURN_IF_ERROR(described.status());
  core::ModuleDescription info = *std::move(described);
  KPROF_RETURN_IF_ERROR(CheckExports(info));
  if (fchmod(upload.fd_, 0444) != 0) return ErrnoError("cannot make read-only", upload.path_);
  close(std::exchange(upload.fd_, -1));

  const std::string path = ModulesDir() + "/" + actual_sha256;
  const std::string temp = upload.path_;
  absl::MutexLock lock(&mutex_);
  if (auto it = entries_.find(actual_sha256); it != entries_.end()) {  // a racing upload won
    return held(it->second);
  }
  KPROF_RETURN_IF_ERROR(MakeRoom(size, client));
  upload.path_.clear();  // Commit renames it or removes it
  KPROF_RETURN_IF_ERROR(Commit(temp, path));
  Entry entry;
  entry.module = {actual_sha256, name, info.format, size, std::move(info.functions), path};
  if (struct stat st{}; stat(path.c_str(), &st) == 0) entry.file = IdentityOf(st);
  entry.last_used = ++clock_;
  entry.generation = ++generations_;
  total_bytes_ += size;
  entry.holders.insert(client);
  StoredModule stored = entry.module;
  // Recorded once it is an entry: a journal written anew by this very line holds it too.
  Record(entries_.emplace(actual_sha256, std::move(entry)).first->second);
  return StoreResult{std::move(stored), false};
}

absl::StatusOr<std::unique_ptr<ModuleRegistry::Upload>> ModuleRegistry::BeginUpload() {
  std::string temp = ModulesDir() + "/.upload-XXXXXX";
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot create a temporary file in", ModulesDir());
  return std::unique_ptr<Upload>(new Upload(fd, std::move(temp)));
}

ModuleRegistry::Upload::~Upload() {
  if (fd_ >= 0) close(fd_);
  if (!path_.empty()) unlink(path_.c_str());
}

absl::Status ModuleRegistry::Upload::Append(std::string_view chunk) {
  // No fsync: the cache is checked against its SHA-256 names at every start, and a module lost
  // to a power cut is uploaded again by its client. An fsync would cost every upload
  // milliseconds, most of what an autotuner pays per candidate.
  for (size_t written = 0; written < chunk.size();) {
    const ssize_t n = write(fd_, chunk.data() + written, chunk.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot write", path_);
    written += static_cast<size_t>(n);
  }
  size_ += chunk.size();
  return absl::OkStatus();
}

void ModuleRegistry::Hold(Entry& entry, const std::string& client) {
  if (!entry.holders.insert(client).second) return;
  Record(entry);
}

void ModuleRegistry::Remove(std::map<std::string, Entry>::iterator it) {
  for (const char* suffix : {"", ".meta", ".holders"}) {
    unlink((it->second.module.path + suffix).c_str());
  }
  total_bytes_ -= it->second.module.size_bytes;
  CloseKept(it->second);
  entries_.erase(it);
}

absl::Status ModuleRegistry::MakeRoom(uint64_t bytes, const std::string& client) {
  while (total_bytes_ + bytes > options_.max_cache_bytes ||
         entries_.size() + 1 > std::max<size_t>(options_.max_modules, 1)) {
    // What each client holds (a module several hold counts for each), the uploader included.
    std::map<std::string, uint64_t> held;
    held[client] += bytes;
    for (const auto& [id, entry] : entries_) {
      for (const std::string& holder : entry.holders) held[holder] += entry.module.size_bytes;
    }
    const uint64_t share = options_.max_cache_bytes / held.size();
    const uint64_t module_share = std::max<size_t>(options_.max_modules, 1) / held.size();
    std::map<std::string, size_t> counts;
    for (const auto& [id, entry] : entries_) {
      for (const std::string& holder : entry.holders) ++counts[holder];
    }
    const auto over_share = [&](const std::string& holder) {
      return held[holder] > share || counts[holder] > module_share;
    };
    // The oldest of the modules the uploader alone holds, and of those whose holders are all
    // over their share; a client over its own share gives up its own first.
    auto own = entries_.end(), others = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.pins > 0) continue;
      const std::set<std::string>& holders = it->second.holders;
      auto& slot = holders.size() == 1 && holders.count(client) == 1 ? own : others;
      if (&slot == &others && !std::all_of(holders.begin(), holders.end(), over_share)) {
        continue;
      }
      if (slot == entries_.end() || it->second.last_used < slot->second.last_used) slot = it;
    }
    auto victim = over_share(client) ? (own != entries_.end() ? own : others)
                                     : (others != entries_.end() ? others : own);
    if (victim == entries_.end()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "module cache full: ", entries_.size(), " modules of ",
          base::FormatByteSize(total_bytes_),
          " are in use or held by clients within their share (limits: ", options_.max_modules,
          " modules, ", base::FormatByteSize(options_.max_cache_bytes), ", shared by ", held.size(),
          " clients); unload modules this client holds, or retry later"));
    }
    base::Log(base::LogSeverity::kInfo, absl::StrCat("evicting module ", victim->first, " (",
                                                     victim->second.module.name, ") to make room"));
    Remove(victim);
    ++evictions_;
  }
  return absl::OkStatus();
}

absl::StatusOr<StoredModule> ModuleRegistry::Find(const std::string& client,
                                                  const std::string& id) {
  absl::MutexLock lock(&mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second.holders.count(client) == 0) {
    return wire::MissingModuleError(id, "upload it first");
  }
  return it->second.module;
}

std::vector<StoredModule> ModuleRegistry::List(const std::string& client, const std::string& after,
                                               size_t max_modules, size_t max_bytes, bool* more) {
  absl::MutexLock lock(&mutex_);
  std::vector<StoredModule> modules;
  size_t bytes = 0;
  *more = false;
  for (auto it = entries_.upper_bound(after); it != entries_.end(); ++it) {
    const Entry& entry = it->second;
    if (entry.holders.count(client) == 0) continue;
    size_t size = entry.module.name.size() + 128;
    for (const std::string& f : entry.module.functions) size += f.size() + 2;
    if (!modules.empty() && (modules.size() == max_modules || bytes + size > max_bytes)) {
      *more = true;
      break;
    }
    bytes += size;
    modules.push_back(entry.module);
  }
  return modules;
}

absl::Status ModuleRegistry::Unload(const std::string& client, const std::string& id) {
  absl::MutexLock lock(&mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second.holders.count(client) == 0) {
    return wire::MissingModuleError(id, "");
  }
  Entry& entry = it->second;
  if (entry.holders.size() > 1) {  // others still hold it
    entry.holders.erase(client);
    Record(entry);
    return absl::OkStatus();
  }
  if (entry.pins > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("module ", id, " is in use by ", entry.pins, " job(s)"));
  }
  Remove(it);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ModuleRegistry::Pin>> ModuleRegistry::Acquire(
    const std::string& client, const std::vector<std::string>& ids,
    std::vector<StoredModule>* modules, bool open_files) {
  absl::MutexLock lock(&mutex_);
  for (const std::string& id : ids) {
    const auto it = entries_.find(id);
    if (it == entries_.end() || it->second.holders.count(client) == 0) {
      return wire::MissingModuleError(id, "upload it first");
    }
  }
  // Each file opened for the worker, and checked to be the one stored: the worker reads the
  // bytes through this descriptor, so what it runs is what was checked here.
  std::vector<int> fds;
  const auto close_all = [&fds] {
    for (int fd : fds) close(fd);
  };
  for (const std::string& id : open_files ? ids : std::vector<std::string>()) {
    const auto it = entries_.find(id);
    absl::StatusOr<int> fd = OpenForJob(it->second, ids);
    if (!fd.ok()) {
      close_all();
      if (absl::IsNotFound(fd.status())) DropDamaged(it);
      return fd.status();
    }
    fds.push_back(*fd);
  }
  std::vector<std::pair<std::string, uint64_t>> pinned;
  for (const std::string& id : ids) {
    Entry& entry = entries_.at(id);
    ++entry.pins;
    entry.last_used = ++clock_;
    pinned.emplace_back(id, entry.generation);
    if (modules != nullptr) modules->push_back(entry.module);
  }
  return std::make_shared<Pin>(this, std::move(pinned), std::move(fds));
}

absl::StatusOr<int> ModuleRegistry::OpenForJob(Entry& entry,
                                               const std::vector<std::string>& job_ids) {
  const std::string& id = entry.module.id;
  const auto unavailable = [&id](int error) {
    // Out of descriptors, say: nothing is wrong with the module.
    return absl::UnavailableError(absl::StrCat(
        "cannot open module ", id, " for the job: ", std::strerror(error), "; retry later"));
  };
  const auto changed = [&id] {
    return wire::MissingModuleError(
        id,
        "its file in the cache was changed or removed since it was stored, and the module was "
        "dropped: upload it again");
  };
  if (entry.fd < 0) {
    const int fd = open(entry.module.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return errno == ENOENT || errno == ELOOP ? changed() : unavailable(errno);
    entry.fd = fd;
    // The least recently used kept descriptors beyond the limit are closed, never this job's.
    for (auto it = kept_by_use_.begin();
         kept_by_use_.size() >= kMaxKeptOpen && it != kept_by_use_.end();) {
      const std::string other = (it++)->second;
      if (std::find(job_ids.begin(), job_ids.end(), other) == job_ids.end()) {
        CloseKept(entries_.at(other));
      }
    }
  } else {
    kept_by_use_.erase(entry.fd_used);
  }
  entry.fd_used = ++clock_;
  kept_by_use_.emplace(entry.fd_used, id);
  // A write, truncation, change of mode, rename or removal changes the file's change time (and
  // a removal its link count): the descriptor kept open sees each of them.
  struct stat st {};
  if (fstat(entry.fd, &st) != 0 || st.st_nlink == 0 || !(IdentityOf(st) == entry.file)) {
    return changed();
  }
  const int job_fd = fcntl(entry.fd, F_DUPFD_CLOEXEC, 0);
  if (job_fd < 0) return unavailable(errno);
  return job_fd;
}

void ModuleRegistry::CloseKept(Entry& entry) {
  if (entry.fd < 0) return;
  close(entry.fd);
  entry.fd = -1;
  kept_by_use_.erase(entry.fd_used);
}

ModuleRegistry::Pin::~Pin() {
  for (int fd : fds_) close(fd);
  registry_->Release(pinned_);
}

void ModuleRegistry::Release(const std::vector<std::pair<std::string, uint64_t>>& pinned) {
  absl::MutexLock lock(&mutex_);
  for (const auto& [id, generation] : pinned) {
    // An entry dropped (damaged) under the pin and stored again is another entry: its pins are
    // not this one's.
    if (auto it = entries_.find(id); it != entries_.end() && it->second.generation == generation) {
      --it->second.pins;
    }
  }
}

uint64_t ModuleRegistry::total_bytes() {
  absl::MutexLock lock(&mutex_);
  return total_bytes_;
}

ModuleRegistry::Stats ModuleRegistry::stats() {
  absl::MutexLock lock(&mutex_);
  return Stats{total_bytes_, entries_.size(), evictions_, uploads_, upload_bytes_};
}

}  // namespace kprof::server

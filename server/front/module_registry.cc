#include "server/front/module_registry.h"

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
#include "base/log.h"
#include "base/read_file.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "core/modules/elf_inspector.h"
#include "core/modules/module_format.h"
#include "nlohmann/json.hpp"
#include "proto/status.h"

namespace kprof::server {
namespace {

absl::Status ErrnoError(std::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(std::string(what), " '", path, "': ", std::strerror(errno)));
}

bool IsModuleId(std::string_view id) {
  return id.size() == 64 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

absl::Status MakeDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0750) != 0 && errno != EEXIST) return ErrnoError("cannot create", path);
  return absl::OkStatus();
}

// Writes `data` to a new temporary file in `dir`, read-only (not synced); returns its path. A
// crash leaves only a ".upload-" file, which the next start removes.
absl::StatusOr<std::string> WriteTemporary(const std::string& dir, const std::string& data) {
  std::string temp = dir + "/.upload-XXXXXX";
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot create a temporary file in", dir);
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status status = ErrnoError("cannot write", temp);
      close(fd);
      unlink(temp.c_str());
      return status;
    }
    written += static_cast<size_t>(n);
  }
  // No fsync, as for uploads (Upload::Append).
  if (fchmod(fd, 0444) != 0) {
    const absl::Status status = ErrnoError("cannot make read-only", temp);
    close(fd);
    unlink(temp.c_str());
    return status;
  }
  close(fd);
  return temp;
}

// Renames a temporary file into place: readers see the whole module or none of it.
absl::Status Commit(const std::string& temp, const std::string& path) {
  if (rename(temp.c_str(), path.c_str()) != 0) {
    const absl::Status status = ErrnoError("cannot rename into", path);
    unlink(temp.c_str());
    return status;
  }
  return absl::OkStatus();
}

// Removes DIR's files and the files of its subdirectories, then those, then DIR: the views/
// directory of hard links that older caches gave each client's workers.
void RemoveOldViews(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string view = dir + "/" + name;
    if (DIR* v = opendir(view.c_str())) {
      while (dirent* f = readdir(v)) {
        if (f->d_name[0] != '.') unlink((view + "/" + f->d_name).c_str());
      }
      closedir(v);
      rmdir(view.c_str());
    } else {
      unlink(view.c_str());
    }
  }
  closedir(d);
  rmdir(dir.c_str());
}

// What every answer listing a module's functions can carry: GetInfo and ListModules hold them
// all, and one module of 17,000 long names took such answers past gRPC's 64 MiB.
constexpr size_t kMaxExports = 4096;
constexpr size_t kMaxExportNameBytes = 256 << 10;

absl::Status CheckExports(const core::ModuleDescription& info) {
  if (info.functions.size() > kMaxExports) {
    return absl::InvalidArgumentError(absl::StrCat("the module exports ", info.functions.size(),
                                                   " functions (limit ", kMaxExports,
                                                   "); export only the kernels to measure"));
  }
  size_t bytes = 0;
  for (const std::string& name : info.functions) bytes += name.size();
  if (bytes > kMaxExportNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the module's exported names take ", bytes,
                                                   " bytes together (limit ", kMaxExportNameBytes,
                                                   "); export only the kernels to measure"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FromHex(std::string_view hex) {
  const auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return absl::InvalidArgumentError("odd length");
  std::string bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = digit(hex[i]), low = digit(hex[i + 1]);
    if (high < 0 || low < 0) return absl::InvalidArgumentError("not hex");
    bytes += static_cast<char>(high * 16 + low);
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModuleRegistry>> ModuleRegistry::Open(
    const RegistryOptions& options) {
  if (options.cache_dir.empty()) return absl::InvalidArgumentError("no cache directory given");
  KPROF_RETURN_IF_ERROR(MakeDirectory(options.cache_dir));
  KPROF_RETURN_IF_ERROR(MakeDirectory(options.cache_dir + "/modules"));

  const std::string lock_path = options.cache_dir + "/lock";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (lock_fd < 0) return ErrnoError("cannot open", lock_path);
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {0};
    const ssize_t n = pread(lock_fd, holder, sizeof holder - 1, 0);
    close(lock_fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "cache directory '", options.cache_dir, "' is in use by another kprofd",
        n > 0 ? absl::StrCat(" (pid ", absl::StripAsciiWhitespace(holder), ")") : std::string()));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(lock_fd, 0) != 0 || pwrite(lock_fd, pid.data(), pid.size(), 0) < 0) {
    base::Log(base::LogSeverity::kWarning, "cannot record the daemon's pid in " + lock_path);
  }
  std::unique_ptr<ModuleRegistry> registry(new ModuleRegistry(options, lock_fd));
  KPROF_RETURN_IF_ERROR(registry->Rescan());
  return registry;
}

ModuleRegistry::~ModuleRegistry() {
  {
    absl::MutexLock lock(&mutex_);
    if (journal_fd_ >= 0) close(journal_fd_);
    for (auto& [id, entry] : entries_) CloseKept(entry);
  }
  close(lock_fd_);  // releases the lock
}

absl::Status ModuleRegistry::Rescan() {
  const std::string dir = ModulesDir();
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoError("cannot list", dir);
  std::vector<std::pair<int64_t, std::string>> found;  // (mtime, id)
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(".upload-", 0) == 0) {  // left by a crash mid-upload
      unlink((dir + "/" + name).c_str());
      continue;
    }
    if (!IsModuleId(name)) continue;
    struct stat st {};
    if (stat((dir + "/" + name).c_str(), &st) == 0) found.emplace_back(st.st_mtime, name);
  }
  closedir(d);
  std::sort(found.begin(), found.end());  // oldest first: least recently used first
  RemoveOldViews(options_.cache_dir + "/views");

  // The journal's last line for each module. A line cut short by a crash does not parse and
  // is passed over.
  std::map<std::string, nlohmann::json> recorded;
  if (absl::StatusOr<std::string> journal = base::ReadFile(JournalPath()); journal.ok()) {
    for (absl::string_view line : absl::StrSplit(*journal, '\n', absl::SkipEmpty())) {
      nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_object() && record.value("id", nlohmann::json()).is_string()) {
        const std::string id = record["id"].get<std::string>();
        recorded[id] = std::move(record);
      }
    }
  }

  absl::MutexLock lock(&mutex_);
  for (const auto& [mtime, id] : found) {
    const std::string path = dir + "/" + id;
    absl::StatusOr<std::string> bytes = base::ReadFile(path, "module");
    // The journal's line; a cache from before kept name and format in a .meta file beside the
    // module, and before that the holders in a .holders file: both moved into the journal.
    nlohmann::json meta;
    if (const auto it = recorded.find(id); it != recorded.end()) {
      meta = std::move(it->second);
    } else if (absl::StatusOr<std::string> text = base::ReadFile(path + ".meta"); text.ok()) {
      meta = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    }
    nlohmann::json holders;
    if (meta.is_object() && meta.contains("holders")) {
      holders = meta["holders"];
    } else if (absl::StatusOr<std::string> text = base::ReadFile(path + ".holders"); text.ok()) {
      holders = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    }
    const std::string format =
        meta.is_object() && meta.value("format", nlohmann::json()).is_string()
            ? meta["format"].get<std::string>()
            : "auto";
    absl::StatusOr<core::ModuleDescription> info =
        bytes.ok() ? core::DescribeModule(*bytes, format)
                   : absl::StatusOr<core::ModuleDescription>(bytes.status());
    if (info.ok()) {
      if (absl::Status exports = CheckExports(*info); !exports.ok()) info = exports;
    }
    if (!info.ok() || base::Sha256Hex(*bytes) != id) {
      base::Log(base::LogSeverity::kWarning,
                absl::StrCat(
                    "dropping damaged module ", id, " from the cache: ",
                    info.ok() ? "its hash does not match" : std::string(info.status().message())));
      unlink(path.c_str());
      unlink((path + ".meta").c_str());
      unlink((path + ".holders").c_str());
      continue;
    }
    Entry entry;
    entry.module.id = id;
    entry.module.name = id;
    entry.module.format = info->format;
    entry.module.size_bytes = bytes->size();
    entry.module.functions = std::move(info->functions);
    entry.module.path = path;
    if (struct stat st{}; stat(path.c_str(), &st) == 0) entry.file = IdentityOf(st);
    if (meta.is_object() && meta.value("name", nlohmann::json()).is_string()) {
      entry.module.name = meta["name"].get<std::string>();
    }
    if (holders.is_array()) {
      for (const nlohmann::json& holder : holders) {
        if (!holder.is_string()) continue;
        if (absl::StatusOr<std::string> label = FromHex(holder.get<std::string>()); label.ok()) {
          entry.holders.insert(*std::move(label));
        }
      }
    }
    entry.last_used = ++clock_;
    entry.generation = ++generations_;
    total_bytes_ += entry.module.size_bytes;
    entries_.emplace(id, std::move(entry));
  }
  // The journal written anew, holding each module once; the files of older caches go once it
  // holds what they said.
  if (absl::Status compacted = CompactJournal(); compacted.ok()) {
    for (const auto& [id, entry] : entries_) {
      unlink((entry.module.path + ".meta").c_str());
      unlink((entry.module.path + ".holders").c_str());
    }
  } else {
    base::Log(base::LogSeverity::kWarning,
              absl::StrCat(compacted.message(),
                           "; names and holders of modules uploaded from now "
                           "on will not be known after a restart"));
  }
  if (!entries_.empty()) {
    base::Log(base::LogSeverity::kInfo,
              absl::StrCat("re-registered ", entries_.size(), " module(s), ", total_bytes_,
                           " bytes, from ", dir));
  }
  return absl::OkStatus();
}

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
    return absl::ResourceExhaustedError(absl::StrCat("module of ", size_bytes,
                                                     " bytes is over the limit of ",
                                                     options_.max_module_bytes, " bytes"));
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

ModuleRegistry::FileIdentity ModuleRegistry::IdentityOf(const struct stat& st) {
  return FileIdentity{st.st_dev, st.st_ino, st.st_size, st.st_ctim};
}

bool ModuleRegistry::Intact(const Entry& entry) {
  struct stat st {};
  return stat(entry.module.path.c_str(), &st) == 0 && IdentityOf(st) == entry.file;
}

void ModuleRegistry::DropDamaged(std::map<std::string, Entry>::iterator it) {
  base::Log(base::LogSeverity::kWarning,
            absl::StrCat("module ", it->first, " (", it->second.module.name,
                         "): its file in the cache changed since it was stored; dropped"));
  Remove(it);
}

std::string ModuleRegistry::RecordText(const Entry& entry) {
  // Holders in hex: a certificate's subject need not be UTF-8, which JSON strings must be.
  nlohmann::json hex = nlohmann::json::array();
  for (const std::string& holder : entry.holders) hex.push_back(base::ToHex(holder));
  const nlohmann::json record = {{"id", entry.module.id},
                                 {"name", entry.module.name},
                                 {"format", entry.module.format},
                                 {"holders", hex}};
  return record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void ModuleRegistry::Record(const Entry& entry) {
  const std::string line = RecordText(entry) + "\n";
  // One write with O_APPEND: a crash leaves at most this line cut short, and a write that
  // fails part way is cut off again, so that the next line starts a line of its own.
  if (journal_fd_ < 0 ||
      write(journal_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    const int error = errno;
    if (journal_fd_ >= 0) (void)!ftruncate(journal_fd_, static_cast<off_t>(journal_bytes_));
    base::Log(base::LogSeverity::kWarning,
              absl::StrCat("module ", entry.module.id, ": its name and holders are not recorded (",
                           journal_fd_ < 0 ? "no journal" : std::strerror(error),
                           "), and will not be known after a restart"));
    return;
  }
  journal_bytes_ += line.size();
  if (journal_bytes_ > std::max<uint64_t>(64 << 10, 4 * journal_compacted_bytes_)) {
    if (absl::Status compacted = CompactJournal(); !compacted.ok()) {
      // Tried again once it has grown as much again, not at every line.
      journal_compacted_bytes_ = journal_bytes_;
      base::Log(base::LogSeverity::kWarning, std::string(compacted.message()));
    }
  }
}

absl::Status ModuleRegistry::CompactJournal() {
  std::string text;
  for (const auto& [id, entry] : entries_) text += RecordText(entry) + "\n";
  KPROF_ASSIGN_OR_RETURN(const std::string temp, WriteTemporary(ModulesDir(), text));
  // Opened before it replaces the old journal, so the descriptor is the new file's or there is
  // no replacing; synced first, since it is all there is of names and holders.
  const int fd = chmod(temp.c_str(), 0640) != 0
                     ? -1
                     : open(temp.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 || fsync(fd) != 0) {
    const absl::Status status = ErrnoError("cannot prepare", temp);
    if (fd >= 0) close(fd);
    unlink(temp.c_str());
    return status;
  }
  if (absl::Status committed = Commit(temp, JournalPath()); !committed.ok()) {
    close(fd);
    return committed;
  }
  if (const int dir = open(ModulesDir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    (void)fsync(dir);  // the rename itself
    close(dir);
  }
  if (journal_fd_ >= 0) close(journal_fd_);
  journal_fd_ = fd;
  journal_bytes_ = journal_compacted_bytes_ = text.size();
  return absl::OkStatus();
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
          "module cache full: ", entries_.size(), " modules of ", total_bytes_,
          " bytes are in use or held by clients within their share (limits: ", options_.max_modules,
          " modules, ", options_.max_cache_bytes, " bytes, shared by ", held.size(),
          " clients); unload modules this client holds, or retry later"));
    }
    base::Log(base::LogSeverity::kInfo, absl::StrCat("evicting module ", victim->first, " (",
                                                     victim->second.module.name, ") to make room"));
    Remove(victim);
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

}  // namespace kprof::server

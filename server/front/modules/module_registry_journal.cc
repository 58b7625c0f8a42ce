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
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

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
#include "server/front/modules/module_registry.h"

// The registry on disk: opening the cache (its lock, its layout, the journal read back and
// checked against the files), and the journal of who holds which module.
namespace kprof::server {

using cache_files::CheckExports;
using cache_files::Commit;
using cache_files::ErrnoError;
using cache_files::IsModuleId;
using cache_files::MakeDirectory;
using cache_files::RemoveOldViews;
using cache_files::WriteTemporary;

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

namespace {

// The modules in `dir` by id, least recently used (oldest) first; files left by a crash
// mid-upload are removed on the way.
absl::StatusOr<std::vector<std::string>> ModuleIdsOldestFirst(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoError("cannot list", dir);
  std::vector<std::pair<int64_t, std::string>> found;  // (mtime, id)
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(".upload-", 0) == 0) {
      unlink((dir + "/" + name).c_str());
      continue;
    }
    if (!IsModuleId(name)) continue;
    struct stat st {};
    if (stat((dir + "/" + name).c_str(), &st) == 0) found.emplace_back(st.st_mtime, name);
  }
  closedir(d);
  std::sort(found.begin(), found.end());
  std::vector<std::string> ids;
  for (auto& [mtime, id] : found) ids.push_back(std::move(id));
  return ids;
}

// The journal's last line for each module. A line cut short by a crash does not parse and is
// passed over.
std::map<std::string, nlohmann::json> JournalRecords(const std::string& journal) {
  std::map<std::string, nlohmann::json> recorded;
  absl::StatusOr<std::string> text = base::ReadFile(journal);
  if (!text.ok()) return recorded;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.value("id", nlohmann::json()).is_string()) {
      const std::string id = record["id"].get<std::string>();
      recorded[id] = std::move(record);
    }
  }
  return recorded;
}

// What was recorded of the module at `path`: its journal line (`record`, null when it has
// none); a cache from before kept name and format in a .meta file beside the module, and before
// that the holders in a .holders file: both read when the journal does not say.
struct Recorded {
  std::optional<std::string> name;
  std::string format = "auto";
  std::set<std::string> holders;  // client labels
};
Recorded RecordedOf(const std::string& path, nlohmann::json record) {
  if (record.is_null()) {
    if (absl::StatusOr<std::string> text = base::ReadFile(path + ".meta"); text.ok()) {
      record = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    }
  }
  nlohmann::json holders;
  if (record.is_object() && record.contains("holders")) {
    holders = record["holders"];
  } else if (absl::StatusOr<std::string> text = base::ReadFile(path + ".holders"); text.ok()) {
    holders = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  }
  Recorded recorded;
  if (record.is_object() && record.value("format", nlohmann::json()).is_string()) {
    recorded.format = record["format"].get<std::string>();
  }
  if (record.is_object() && record.value("name", nlohmann::json()).is_string()) {
    recorded.name = record["name"].get<std::string>();
  }
  if (holders.is_array()) {
    for (const nlohmann::json& holder : holders) {
      if (!holder.is_string()) continue;
      if (absl::StatusOr<std::string> label = base::FromHex(holder.get<std::string>());
          label.ok()) {
        recorded.holders.insert(*std::move(label));
      }
    }
  }
  return recorded;
}

}  // namespace

absl::Status ModuleRegistry::Rescan() {
  const std::string dir = ModulesDir();
  KPROF_ASSIGN_OR_RETURN(const std::vector<std::string> ids, ModuleIdsOldestFirst(dir));
  RemoveOldViews(options_.cache_dir + "/views");
  std::map<std::string, nlohmann::json> journal = JournalRecords(JournalPath());

  absl::MutexLock lock(&mutex_);
  for (const std::string& id : ids) {
    const std::string path = dir + "/" + id;
    absl::StatusOr<std::string> bytes = base::ReadFile(path, "module");
    const auto line = journal.find(id);
    Recorded recorded =
        RecordedOf(path, line != journal.end() ? std::move(line->second) : nlohmann::json());
    absl::StatusOr<core::ModuleDescription> info =
        bytes.ok() ? core::DescribeModule(*bytes, recorded.format)
                   : absl::StatusOr<core::ModuleDescription>(bytes.status());
    if (info.ok()) {
      if (absl::Status exports = CheckExports(*info); !exports.ok()) info = exports;
    }
    if (!info.ok() || base::Sha256Hex(*bytes) != id) {
      base::Log(base::LogSeverity::kWarning,
                absl::StrCat(
                    "dropping damaged module ", id, " from the cache: ",
                    info.ok() ? "its hash does not match" : std::string(info.status().message())));
      for (const char* suffix : {"", ".meta", ".holders"}) unlink((path + suffix).c_str());
      continue;
    }
    Entry entry;
    entry.module = {
        id,  recorded.name.value_or(id), info->format, bytes->size(), std::move(info->functions),
        path};
    if (struct stat st{}; stat(path.c_str(), &st) == 0) entry.file = IdentityOf(st);
    entry.holders = std::move(recorded.holders);
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
              absl::StrCat("re-registered ", entries_.size(), " module(s), ",
                           base::FormatByteSize(total_bytes_), ", from ", dir));
  }
  return absl::OkStatus();
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

}  // namespace kprof::server

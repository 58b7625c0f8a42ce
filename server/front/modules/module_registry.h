// ModuleRegistry: the daemon's content-addressed store of uploaded modules.
//
// A module's id is the SHA-256 of its bytes (lowercase hex). Bytes live under
// CACHE_DIR/modules/ID (with ID.meta holding the name and format), written under a temporary
// name, synced and renamed into place, so a crash never leaves half a module; at start-up the
// registry re-registers what it finds (verifying each hash), so modules survive a restart. The
// directory is locked against a second daemon. The cache is bounded: storing past the limit
// evicts the least recently used modules that no job is using.
//
// Modules have holders: the clients (ProfilerService::Authenticate) that uploaded them. Bytes
// several clients upload are stored once, but a client sees, runs and unloads only what it
// holds; unloading drops its hold, and the module goes with its last holder. Holders are kept
// in CACHE_DIR/modules/ID.meta beside the name and format (their labels in hex, in "holders")
// and survive a restart; a cache that kept them in an ID.holders file of their own has them
// moved at start. A module stored before holders were recorded has none until a client uploads
// its bytes again (which writes nothing but the hold).
//
// Workers never see the cache: a job's modules reach its worker as descriptors the front opened
// (Acquire), each checked to be the file stored — same inode, size and change time — so a file
// changed behind the daemon's back is dropped (and uploaded again) rather than run.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kprof::server {

struct StoredModule {
  std::string id;
  std::string name;
  std::string format;  // "shared-library", "cubin", "fatbin" or "ptx"
  uint64_t size_bytes = 0;
  std::vector<std::string> functions;
  std::string path;  // where the bytes are; workers get them as a descriptor, never the path
};

struct RegistryOptions {
  std::string cache_dir;
  uint64_t max_module_bytes = uint64_t{256} << 20;
  uint64_t max_cache_bytes = uint64_t{4} << 30;
  size_t max_modules = 10000;  // held at once; past it, the least recently used go
};

class ModuleRegistry {
 public:
  // Creates the directories, takes the lock (FAILED_PRECONDITION naming the holder's pid when
  // another daemon has it) and re-registers stored modules.
  static absl::StatusOr<std::unique_ptr<ModuleRegistry>> Open(const RegistryOptions& options);
  ~ModuleRegistry();

  // Checks a module's declared header before its bytes arrive: the format is known, the size
  // within the limit, the hash 64 hex digits.
  absl::Status CheckHeader(const std::string& name, const std::string& format, uint64_t size_bytes,
                           const std::string& sha256) const;

  // An upload's bytes, written to a temporary file in the cache as they arrive (a crash leaves
  // a ".upload-" file, which the next start removes), not held in memory.
  class Upload {
   public:
    ~Upload();  // removes the file unless Store moved it into place
    Upload(const Upload&) = delete;
    Upload& operator=(const Upload&) = delete;
    absl::Status Append(std::string_view chunk);
    uint64_t size() const { return size_; }

   private:
    friend class ModuleRegistry;
    Upload(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    int fd_;
    std::string path_;
    uint64_t size_ = 0;
  };
  absl::StatusOr<std::unique_ptr<Upload>> BeginUpload();

  struct StoreResult {
    StoredModule module;
    bool already_held = false;
  };
  // Stores `upload` (whose SHA-256 the caller computed as it arrived) after checking it
  // against the declared size and hash and reading its format and exports. Bytes already
  // held are not written again.
  // `client` holds the module afterwards. `already_held`: `client` held it before. Bytes
  // another client holds are not written again either.
  absl::StatusOr<StoreResult> Store(const std::string& client, const std::string& name,
                                    const std::string& format, Upload& upload,
                                    uint64_t declared_size, const std::string& declared_sha256,
                                    const std::string& actual_sha256);

  // The module `id` if `client` holds it; NOT_FOUND ("unknown module") otherwise.
  absl::StatusOr<StoredModule> Find(const std::string& client, const std::string& id)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // The modules `client` holds with ids after `after`, in order of id: at most `max_modules`,
  // and no more than `max_bytes` of function names (but always one). `more`: others follow.
  std::vector<StoredModule> List(const std::string& client, const std::string& after,
                                 size_t max_modules, size_t max_bytes, bool* more)
      ABSL_LOCKS_EXCLUDED(mutex_);

  // Drops `client`'s hold; the module goes with its last holder. NOT_FOUND when `client` does
  // not hold it; FAILED_PRECONDITION when it is the last holder and a job uses the module.
  absl::Status Unload(const std::string& client, const std::string& id) ABSL_LOCKS_EXCLUDED(mutex_);

  // Marks modules in use by a job (not evictable) until the returned handle is destroyed, and
  // returns them, each file open read-only for the job's worker (Pin::fds, in the order of
  // `ids`: the pin's own descriptors, duplicates of ones the registry keeps open). NOT_FOUND naming
  // the first id `client` does not hold — or whose file is no longer the one stored (removed,
  // replaced, written to, truncated, its mode changed: its identity, size and change time differ),
  // which is then dropped so that the client uploads it again.
  class Pin;
  // Without `open_files` the pin only holds the modules (for jobs still waiting their turn).
  absl::StatusOr<std::shared_ptr<Pin>> Acquire(const std::string& client,
                                               const std::vector<std::string>& ids,
                                               std::vector<StoredModule>* modules,
                                               bool open_files = true) ABSL_LOCKS_EXCLUDED(mutex_);

  const RegistryOptions& options() const { return options_; }
  uint64_t total_bytes() ABSL_LOCKS_EXCLUDED(mutex_);

  // For the metrics: the cache now, and what came and went since the start.
  struct Stats {
    uint64_t bytes = 0;
    uint64_t modules = 0;
    int64_t evictions = 0;  // modules evicted to make room
    int64_t uploads = 0;    // modules received (held already or not)
    uint64_t upload_bytes = 0;
  };
  Stats stats() ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  // What a module's file was when it was stored or verified at start.
  struct FileIdentity {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    timespec ctime{};
    bool operator==(const FileIdentity& o) const {
      return dev == o.dev && ino == o.ino && size == o.size && ctime.tv_sec == o.ctime.tv_sec &&
             ctime.tv_nsec == o.ctime.tv_nsec;
    }
  };
  static FileIdentity IdentityOf(const struct stat& st);

  struct Entry {
    StoredModule module;
    FileIdentity file;
    uint64_t last_used = 0;
    int pins = 0;
    uint64_t generation = 0;  // each entry made anew, after a drop too, has its own
    std::set<std::string> holders;
    // The file kept open, read-only, once a job has used it (-1: not open): a job's worker gets
    // a duplicate, so that a job costs no path lookup. The descriptor's identity is the stored
    // one's when it is opened; an fstat at each use sees any change since.
    int fd = -1;
    uint64_t fd_used = 0;
  };

  ModuleRegistry(RegistryOptions options, int lock_fd)
      : options_(std::move(options)), lock_fd_(lock_fd) {}
  absl::Status Rescan();
  // Evicts least recently used modules until `bytes` more fit, for `client`: a module only
  // `client` holds may go, and one of other holders only if each of them holds more than a
  // fair share of the cache (its size, and its module count, over the number of clients
  // holding anything) — one client's uploads never push out the modules of a client within
  // its share. A client over its share gives up its own modules first; one within it, those
  // of the clients over theirs.
  absl::Status MakeRoom(uint64_t bytes, const std::string& client)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Adds `client` to the entry's holders, recording them on disk when that is new.
  void Hold(Entry& entry, const std::string& client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The journal's line for a module: its id, name, format and holders, as JSON.
  static std::string RecordText(const Entry& entry);
  // Appends the entry's line to the journal (its name, format and holders after a restart).
  void Record(const Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Writes the journal anew with one line per module held, and appends to it from then on.
  absl::Status CompactJournal() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  std::string JournalPath() const { return ModulesDir() + "/journal"; }
  // Whether the entry's file is still the one stored (a stat; no hash).
  static bool Intact(const Entry& entry);
  // Logs and removes an entry whose file is no longer the one stored.
  void DropDamaged(std::map<std::string, Entry>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Removes the module's files and entry.
  void Remove(std::map<std::string, Entry>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Release(const std::vector<std::pair<std::string, uint64_t>>& pinned)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // A duplicate of the entry's kept descriptor for one job, opening the file first when it is
  // not kept yet (closing the least recently used kept one beyond kMaxKeptOpen). NOT_FOUND when
  // the file is no longer the one stored; UNAVAILABLE when out of descriptors.
  absl::StatusOr<int> OpenForJob(Entry& entry, const std::vector<std::string>& job_ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void CloseKept(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  std::string ModulesDir() const { return options_.cache_dir + "/modules"; }

  const RegistryOptions options_;
  const int lock_fd_;
  absl::Mutex mutex_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mutex_);
  uint64_t total_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t evictions_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t uploads_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t upload_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t clock_ ABSL_GUARDED_BY(mutex_) = 0;  // use counter for LRU order
  uint64_t generations_ ABSL_GUARDED_BY(mutex_) = 0;
  // Module files kept open for jobs: the most used ones, at most this many.
  static constexpr size_t kMaxKeptOpen = 128;
  std::map<uint64_t, std::string> kept_by_use_ ABSL_GUARDED_BY(mutex_);  // by Entry::fd_used
  // modules/journal: a line per module stored and per change of its holders, the last line of
  // an id the one that counts. One append per upload, where a file of its own per module would
  // cost the filesystem an inode each (the dearest step of storing a small module). Written
  // anew at each start and once it grows past four times what it holds.
  int journal_fd_ ABSL_GUARDED_BY(mutex_) = -1;
  uint64_t journal_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t journal_compacted_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
};

class ModuleRegistry::Pin {
 public:
  Pin(ModuleRegistry* registry, std::vector<std::pair<std::string, uint64_t>> pinned,
      std::vector<int> fds)
      : registry_(registry), pinned_(std::move(pinned)), fds_(std::move(fds)) {}
  ~Pin();
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  // The modules' files, opened read-only, in the order of the ids; closed with the pin.
  const std::vector<int>& fds() const { return fds_; }

 private:
  ModuleRegistry* registry_;
  std::vector<std::pair<std::string, uint64_t>> pinned_;  // id and entry generation
  std::vector<int> fds_;
};

}  // namespace kprof::server

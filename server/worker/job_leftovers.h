// What a job may leave in its worker that the next job would meet: threads still running, the
// standard streams closed, files in the scratch directory, the job socket replaced. The worker
// checks after each job and, when something is left, answers and exits so that the next job
// runs in a fresh process (WorkerAnswer.recycle).
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace kprof::server {

// The process's threads, less the CUDA driver's own when `skip_cuda` (it starts them as it sees
// fit — "cuda-EvtHandlr", "cuda00001400006" — and they are not a job's leftovers).
int CountThreads(bool skip_cuda);
// Their ids, sorted.
std::vector<int> ThreadIds(bool skip_cuda);

// The file a descriptor is open on: a job that puts another file on a descriptor the worker
// relies on (dup2 over the job socket) changes it.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileIdentity& o) const { return dev == o.dev && ino == o.ino; }
};
FileIdentity IdentityOf(int fd);

// The worker's scratch directory (its TMPDIR), kept open to be looked into after each job.
class ScratchDirectory {
 public:
  // None (Leftovers is always "") for an empty path or one that cannot be opened.
  explicit ScratchDirectory(const std::string& path);
  ~ScratchDirectory();
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  // What a job left in it, or "" when it is empty; also says so when the job closed the
  // descriptor or put another directory on it, to hide its files.
  std::string Leftovers() const;

 private:
  DIR* dir_ = nullptr;
  FileIdentity identity_;
  // On tmpfs a directory's size counts its entries (20 bytes each, "." and ".." included), so
  // the fstat that checks the descriptor also says whether it is empty.
  bool tmpfs_ = false;
};

// Why the worker is no longer fit for the next job, or "" when it is: the standard streams
// closed, more threads than `baseline_threads`, or the scratch directory's leftovers.
std::string Disturbance(int baseline_threads, bool skip_cuda, const ScratchDirectory& scratch);

}  // namespace kprof::server

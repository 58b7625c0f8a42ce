// What kprofd checks of its host before it serves: that it can listen where it is told, and
// that its directories are there or can be made, each refusal naming the option to change.
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/front/daemon/daemon_options.h"
#include "server/front/daemon/journal_log.h"

namespace kprof::server {

std::string WhyCannotBind(const std::string& address) {
  if (address.rfind("unix:", 0) == 0 || address.find("://") != std::string::npos) return "";
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return "no port (accepted: HOST:PORT, e.g. 127.0.0.1:9177)";
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int error =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return absl::StrCat("cannot resolve '", host, "': ", gai_strerror(error));
  }
  // As gRPC listens: on every address the name has, serving if one of them binds; a port in
  // use on any of them keeps it from starting.
  std::string first_error;
  bool bound = false, in_use = false;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int probe = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (probe < 0) {
      if (first_error.empty()) first_error = std::strerror(errno);
      continue;
    }
    const int on = 1;  // as gRPC binds: a port left in TIME_WAIT is not "in use"
    setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(probe, a->ai_addr, a->ai_addrlen) == 0) {
      bound = true;
    } else if (errno == EADDRINUSE) {
      in_use = true;
    } else if (first_error.empty()) {
      first_error = std::strerror(errno);
    }
    close(probe);
  }
  freeaddrinfo(found);
  if (in_use) return kPortInUse;
  return bound ? "" : first_error;
}

namespace {

// "/var/cache/kprofd/" is "/var/cache/kprofd".
std::string WithoutTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

absl::Status ProbeDirectory(const std::string& given, const std::string& option) {
  const std::string dir = WithoutTrailingSlashes(given);
  // The directory itself, else the nearest existing directory above it, where it would be made.
  std::string at = dir;
  struct stat st {};
  while (stat(at.c_str(), &st) != 0) {
    if ((errno != ENOENT && errno != ENOTDIR) || at == ".") {
      return absl::FailedPreconditionError(absl::StrCat("the directory '", dir, "' (", option,
                                                        "): ", at, ": ", std::strerror(errno)));
    }
    const size_t slash = at.rfind('/');
    at = slash == std::string::npos ? "." : slash == 0 ? "/" : at.substr(0, slash);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        at == dir ? absl::StrCat("'", dir, "' (", option, ") is not a directory")
                  : absl::StrCat("cannot create '", dir, "' (", option, "): '", at,
                                 "' is not a directory"));
  }
  // Tried, not judged by mode bits: root passes access(2) on a read-only file system or /proc.
  std::string probe = (at == "/" ? "" : at) + "/.kprofd-probe-XXXXXX";
  if (mkdtemp(probe.data()) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        at == dir
            ? absl::StrCat("the directory '", dir, "' (", option, ") is not writable")
            : absl::StrCat("cannot create '", dir, "' (", option, "): '", at, "' is not writable"),
        " by uid ", geteuid(), ": ", std::strerror(errno)));
  }
  rmdir(probe.c_str());
  return absl::OkStatus();
}

absl::Status MakeDirectories(const std::string& given, const std::string& option) {
  KPROF_RETURN_IF_ERROR(ProbeDirectory(given, option));
  const std::string dir = WithoutTrailingSlashes(given);
  // Each missing level above the directory itself, which its owner makes with its own mode.
  for (size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    const std::string level = dir.substr(0, slash);
    if (mkdir(level.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create '", level, "' for '", dir, "' (", option, "): ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckConfiguration(const DaemonFlags& flags, std::vector<std::string>* notes) {
  KPROF_RETURN_IF_ERROR(CheckLimits(flags));
  KPROF_RETURN_IF_ERROR(ChooseLogFormat(flags.log_format).status());
  KPROF_RETURN_IF_ERROR(WorkerPlacement(flags).status());
  KPROF_RETURN_IF_ERROR(WorkerUserFor(flags).status());
  KPROF_RETURN_IF_ERROR(ServerCredentials(flags).status());
  KPROF_RETURN_IF_ERROR(Tokens(flags).status());
  KPROF_ASSIGN_OR_RETURN(const std::string metrics, MetricsAddress(flags));
  const std::string worker = flags.worker.empty() ? DefaultWorker() : flags.worker;
  if (access(worker.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the worker executable '", worker, "' is missing or not executable (--worker sets it)"));
  }
  const std::string cache_dir = flags.cache_dir.empty() ? DefaultCacheDir() : flags.cache_dir;
  KPROF_RETURN_IF_ERROR(ProbeDirectory(cache_dir, "--cache-dir"));
  KPROF_RETURN_IF_ERROR(ProbeDirectory(StateDir(flags, cache_dir), "--state-dir"));
  if (!flags.scratch_dir.empty()) {
    struct stat st {};
    if (stat(flags.scratch_dir.c_str(), &st) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the scratch directory '", flags.scratch_dir,
                       "' (--scratch-dir): ", std::strerror(errno)));
    }
    KPROF_RETURN_IF_ERROR(ProbeDirectory(flags.scratch_dir, "--scratch-dir"));
  }
  // The addresses, bound and let go: a port another program holds now is a note (the daemon
  // being checked may be the one running), anything else an error.
  for (const auto& [address, option] :
       {std::pair{flags.listen, "--listen"}, std::pair{metrics, "--metrics-listen"}}) {
    if (address.empty()) continue;
    const std::string why = WhyCannotBind(address);
    if (why == kPortInUse) {
      if (notes != nullptr) {
        notes->push_back(
            absl::StrCat(option, " ", address, ": ", why, " now; a start fails until it is free"));
      }
    } else if (!why.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(option, " ", address, ": cannot listen there: ", why));
    }
  }
  return absl::OkStatus();
}

}  // namespace kprof::server

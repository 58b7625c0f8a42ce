// LeaseManager's clocks: each lease's journal, and the helper process (kprofd-worker --clocks)
// that locks, records and puts back a device's clocks, so that the daemon itself never writes
// /sys or loads NVML.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/front/scheduling/lease_manager.h"

extern char** environ;

namespace kprof::server {

using json = nlohmann::json;

std::string LeaseManager::Journal(const std::string& id) const {
  return absl::StrCat(options_.state_dir, "/clocks-", id, ".json");
}

std::string LeaseManager::Restore(const Lease& lease) const {
  const absl::StatusOr<std::string> answer =
      RunHelper(options_, {"restore", "--state", Journal(lease.id)});
  if (!answer.ok()) {
    const std::string why = absl::StrCat("not put back: ", answer.status().message(),
                                         " (tried again at the next start)");
    base::Log(base::LogSeverity::kWarning,
              absl::StrCat("lease ", lease.id.substr(0, 8), ": clocks ", why));
    return why;
  }
  const json doc = json::parse(*answer, nullptr, false);
  const std::string restored = doc.is_object() ? doc.value("restored", "") : "";
  return restored.empty() ? "nothing to put back" : restored;
}

absl::StatusOr<std::string> LeaseManager::RunHelper(const LeaseOptions& options,
                                                    std::vector<std::string> args) {
  args.insert(args.begin(), {options.helper, "--clocks"});
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int spawned =
      posix_spawn(&pid, options.helper.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", options.helper, ": ", std::strerror(spawned)));
  }
  std::string text;
  const absl::Time until = absl::Now() + options.helper_timeout;
  bool timed_out = false;
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(until - absl::Now());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{out[0], POLLIN, 0};
    const int ready = poll(&fd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;  // the pipe is unusable: what was read is all there is
    if (ready == 0) continue;
    char buffer[4096];
    const ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(options.helper,
                                                    " --clocks did not answer within ",
                                                    absl::FormatDuration(options.helper_timeout)));
  }
  const json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) {
    return absl::InternalError(
        absl::StrCat(options.helper, " --clocks answered no JSON (",
                     WIFSIGNALED(status) ? absl::StrCat("killed by signal ", WTERMSIG(status))
                                         : absl::StrCat("exit status ", WEXITSTATUS(status)),
                     text.empty() ? "" : absl::StrCat("; it wrote: ", text.substr(0, 200)), ")"));
  }
  if (doc.contains("error")) {
    const json& error = doc["error"];
    const int code = error.value("code", static_cast<int>(absl::StatusCode::kInternal));
    return absl::Status(static_cast<absl::StatusCode>(code), error.value("message", ""));
  }
  return text;
}

absl::StatusOr<std::string> LeaseManager::RestoreLeftovers(const LeaseOptions& options) {
  std::vector<std::string> lines, failures;
  for (const std::filesystem::path& journal :
       base::DirectoryEntries(options.state_dir, "clocks-")) {
    if (journal.extension() != ".json") continue;
    const absl::StatusOr<std::string> answer =
        RunHelper(options, {"restore", "--state", journal.string()});
    if (!answer.ok()) {
      failures.push_back(
          absl::StrCat(journal.filename().string(), ": ", answer.status().message()));
      continue;
    }
    const json doc = json::parse(*answer, nullptr, false);
    const std::string restored = doc.is_object() ? doc.value("restored", "") : "";
    if (!restored.empty()) lines.push_back(restored);
  }
  if (!failures.empty()) {
    return absl::FailedPreconditionError(absl::StrJoin(failures, "; "));
  }
  return absl::StrJoin(lines, "; ");
}

}  // namespace kprof::server

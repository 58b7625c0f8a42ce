// Daemon: a real kprofd for a test — started on 127.0.0.1:0 with its own cache directory, its
// port read back from --port-file, and stopped (SIGTERM, then SIGKILL) however the test ends.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"

extern char** environ;

namespace kprof::testing {

// The kprofd under test: the build's, or $KPROF_TEST_KPROFD (a bundle on a GPU machine).
inline const char* KprofdPath() {
  const char* path = std::getenv("KPROF_TEST_KPROFD");
  return path != nullptr && *path != '\0' ? path : KPROFD_PATH;
}

class Daemon {
 public:
  // Starts kprofd with `extra` options, using `cache_dir` (a new one when empty). Returns false
  // (with the daemon's exit status in exit_status()) when it did not come up.
  bool Start(const std::string& cache_dir, const std::vector<std::string>& extra = {}) {
    cache_dir_ = cache_dir;
    port_file_ = temp_.path() + "/port";
    // A launcher may run kprofd as another user, who must be able to write the port file.
    if (!launcher_.empty()) chmod(temp_.path().c_str(), 0777);
    std::remove(port_file_.c_str());
    const std::string program = program_.empty() ? KprofdPath() : program_;
    std::vector<std::string> args = launcher_;
    args.insert(args.end(), {program, "--listen", listen_, "--port-file", port_file_, "--cache-dir",
                             cache_dir_});
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!stderr_path_.empty()) {
      posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(),
                                       O_WRONLY | O_CREAT | O_APPEND, 0644);
    }
    std::vector<std::string> env = env_;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('='));
      bool overridden = false;
      for (const std::string& mine : env_) overridden |= mine.rfind(name + "=", 0) == 0;
      if (!overridden) env.push_back(entry);
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int spawned =
        posix_spawn(&pid_, args[0].c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) return false;
    for (int i = 0; i < 1000; ++i) {  // up to 10 s
      std::ifstream in(port_file_);
      if (in >> port_ && port_ > 0) return true;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = status;
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // SIGTERM and wait (up to 10 s, then SIGKILL). Returns the wait status.
  int Stop() {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 1000; ++i) {
      if (waitpid(pid_, &exit_status_, WNOHANG) == pid_) {
        pid_ = -1;
        return exit_status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &exit_status_, 0);
    pid_ = -1;
    return exit_status_;
  }

  // SIGKILL, as a crash would end it: nothing of its own shutdown runs.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, &exit_status_, 0);
    pid_ = -1;
  }

  ~Daemon() { Stop(); }

  // Before Start: the address to listen on, and a file to take the daemon's stderr.
  void set_listen(std::string listen) { listen_ = std::move(listen); }
  void set_stderr(std::string path) { stderr_path_ = std::move(path); }
  // Before Start: an environment variable for the daemon (and so its workers), over this
  // process's own.
  void set_env(const std::string& name, const std::string& value) {
    env_.push_back(name + "=" + value);
  }
  // Before Start: the kprofd to run (default KprofdPath()), and a program that runs it, with
  // its options (e.g. {"/usr/bin/setpriv", "--reuid=65534", ...}), which must exec it in place.
  void set_program(std::string program) { program_ = std::move(program); }
  void set_launcher(std::vector<std::string> launcher) { launcher_ = std::move(launcher); }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  int exit_status() const { return exit_status_; }

 private:
  TempDir temp_;
  std::string cache_dir_, port_file_, listen_ = "127.0.0.1:0", stderr_path_, program_;
  std::vector<std::string> launcher_;
  std::vector<std::string> env_;
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
};

}  // namespace kprof::testing

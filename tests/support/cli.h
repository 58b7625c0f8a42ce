// RunKprof: the kprof CLI run against a daemon, its exit code, stdout and stderr captured; and
// CommandOutput, any shell command's stdout.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace kprof::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// The kprof under test: the build's, or $KPROF_TEST_KPROF (a bundle on a GPU machine).
inline std::string KprofPath() {
  const char* path = std::getenv("KPROF_TEST_KPROF");
  return path != nullptr && *path != '\0' ? path : KPROF_CLI_PATH;
}

// Runs `command` through the shell; its stdout and (in *exit_code, when given) exit status.
inline std::string CommandOutput(const std::string& command, int* exit_code = nullptr) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  const int status = pclose(pipe);
  if (exit_code != nullptr) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// Runs `kprof --target TARGET ARGS` through the shell; stderr goes by way of a file in
// `scratch_dir`.
inline CliResult RunKprof(const std::string& target, const std::string& args,
                          const std::string& scratch_dir) {
  const std::string err_file = scratch_dir + "/kprof-stderr";
  const std::string command = KprofPath() + " --target " + target + " " + args + " 2>" + err_file;
  CliResult result;
  result.out = CommandOutput(command, &result.exit_code);
  std::ifstream in(err_file);
  result.err.assign(std::istreambuf_iterator<char>(in), {});
  return result;
}

}  // namespace kprof::testing

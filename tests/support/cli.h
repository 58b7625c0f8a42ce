// RunKprof: the kprof CLI run against a daemon, its exit code, stdout and stderr captured.
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

// Runs `kprof --target TARGET ARGS` through the shell; stderr goes by way of a file in
// `scratch_dir`.
inline CliResult RunKprof(const std::string& target, const std::string& args,
                          const std::string& scratch_dir) {
  const std::string err_file = scratch_dir + "/kprof-stderr";
  const std::string command = KprofPath() + " --target " + target + " " + args + " 2>" + err_file;
  CliResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  result.err.assign(std::istreambuf_iterator<char>(in), {});
  return result;
}

}  // namespace kprof::testing

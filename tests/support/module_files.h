// Paths and bytes of the test modules that tests/modules builds.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace kprof::testing {

// Where the test modules are: the build's, or $KPROF_TEST_MODULE_DIR (a bundle on a GPU
// machine).
inline std::string TestModuleDir() {
  const char* dir = std::getenv("KPROF_TEST_MODULE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : KPROF_TEST_MODULE_DIR;
}

inline std::string TestModulePath(const std::string& name) {
  return TestModuleDir() + "/" + name + ".so";
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace kprof::testing

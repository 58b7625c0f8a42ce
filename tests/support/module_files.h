// Paths and bytes of the test modules that tests/modules builds.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace kprof::testing {

inline std::string TestModulePath(const std::string& name) {
  return std::string(KPROF_TEST_MODULE_DIR) + "/" + name + ".so";
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace kprof::testing

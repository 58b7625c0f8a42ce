// TempDir: a fresh directory under the test's temporary directory, removed with the object;
// WriteFile puts a file (and its parent directories) under it, for fake /proc and /sys trees.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kprof::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kprof-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `contents` to path()/relative, creating the directories on the way.
  void WriteFile(const std::string& relative, const std::string& contents) const {
    const std::filesystem::path file = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << contents;
  }

 private:
  std::string path_;
};

}  // namespace kprof::testing

// CommandLine: the options of kprofd and kprof — `--name value`, `--name=value`, `--flag` —
// declared with a destination and a help line each. Errors say which option and what it wants.
//
//   CommandLine cl("kprofd");
//   cl.AddString("listen", &listen, "HOST:PORT", "address to serve on");
//   cl.AddInt("max-queue", &max_queue, "N", "jobs that may wait per device");
//   KPROF_RETURN_IF_ERROR(cl.Parse(args, &positional));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kprof::base {

class CommandLine {
 public:
  explicit CommandLine(std::string program) : program_(std::move(program)) {}

  void AddString(std::string name, std::string* out, std::string value_name, std::string help);
  void AddInt(std::string name, int64_t* out, std::string value_name, std::string help);
  void AddUint(std::string name, uint64_t* out, std::string value_name, std::string help);
  void AddDouble(std::string name, double* out, std::string value_name, std::string help);
  // A size: "268435456", "256 MiB", "4G" (base/byte_size.h).
  void AddBytes(std::string name, uint64_t* out, std::string value_name, std::string help);
  // "60s", "500ms", "2m" (absl::ParseDuration); a bare number is seconds.
  void AddDuration(std::string name, absl::Duration* out, std::string value_name, std::string help);
  void AddFlag(std::string name, bool* out, std::string help);
  // May be given many times; each value is appended.
  void AddRepeated(std::string name, std::vector<std::string>* out, std::string value_name,
                   std::string help);

  // Parses `args` (without the program name). Anything not an option goes to `positional`,
  // in order; "--" ends the options. INVALID_ARGUMENT names the offending option.
  absl::Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional);

  // Whether an option was given on this command line.
  bool Given(const std::string& name) const;

  // One line per option: "  --max-queue N   jobs that may wait per device".
  std::string Help() const;

 private:
  struct Option {
    std::string name;
    std::string value_name;  // empty for flags
    std::string help;
    std::function<absl::Status(const std::string&)> set;
    bool given = false;
  };
  Option* Find(const std::string& name);

  std::string program_;
  std::vector<Option> options_;
};

}  // namespace kprof::base

// The one way kprof builds the call a request names, from the command line (`kprof time`,
// `kprof profile`) or from JSON (a batch line, a sequence file): its module — a file, uploaded
// when the daemon lacks it; a module id; or "builtin" — its function, its argument specs and, for
// a CUDA kernel, its launch configuration.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli/output.h"
#include "client/kprof_client.h"
#include "kprof/v1/kprof.pb.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace kprof::client {

// MODULE as a module id: a file is uploaded first (with the format given), an id or "builtin"
// is taken as it is.
using ModuleResolver = std::function<absl::StatusOr<std::string>(const std::string& module)>;
bool IsModuleId(const std::string& text);
ModuleResolver UploadingTo(Client& client, const std::string& module_format);

// The options of a call on the command line.
struct CallOptions {
  std::vector<std::string> args;
  std::string grid, block;
  int64_t shared_bytes = 0;
  std::string module_format = "auto";
  CLI::Option* grid_option = nullptr;
  CLI::Option* block_option = nullptr;
  CLI::Option* shared_bytes_option = nullptr;
};

// Declares --arg (once per argument), --grid, --block, --shared-bytes and --module-format.
void AddCallOptions(CLI::App& command, CallOptions& options);

// Whether a word of the command line is an argument spec ("float32[4]", "float64:10"), for
// saying so when one is given without --arg.
bool LooksLikeArgSpec(const std::string& word);
// The --arg values as the shell left them: one with a '[' and not its ']' was cut at a space
// (unquoted); a usage error then says to quote it, showing the spec whole.
absl::Status CheckArgWords(const std::vector<std::string>& args);

// Makes `option` take a size as the daemon's options do ("48 KiB", "32M", "65536";
// base/byte_size.h), handing the number of bytes on. Returns `option`.
CLI::Option* TakesSize(CLI::Option* option);

// Where the arguments lie: --tensor-alignment, --tensor-offset, --huge-pages.
struct PlacementFlags {
  uint64_t alignment = 64;
  std::vector<uint32_t> offsets;
  bool huge_pages = false;
  CLI::Option* alignment_option = nullptr;

  bool alignment_given() const;
  // Sets a request's tensor_alignment (when given), tensor_offset and huge_pages.
  template <typename Request>
  void To(Request& request) const {
    if (alignment_given()) request.set_tensor_alignment(alignment);
    for (uint32_t offset : offsets) request.add_tensor_offset(offset);
    request.set_huge_pages(huge_pages);
  }
};
void AddPlacementOptions(CLI::App& command, PlacementFlags& flags);

// How the job queues for its device: --priority interactive|batch (by default a call's job is
// interactive, a batch's `batch`).
struct PriorityFlag {
  std::string priority;
  template <typename Request>
  void To(Request& request) const {
    if (priority == "batch") request.set_priority(kprof::v1::PRIORITY_BATCH);
    if (priority == "interactive") request.set_priority(kprof::v1::PRIORITY_INTERACTIVE);
  }
};
void AddPriorityOption(CLI::App& command, PriorityFlag& flag, bool batch = false);

// The call MODULE FUNCTION with the options; a usage error for a half-given launch.
absl::StatusOr<kprof::v1::FunctionCall> CallFromCommandLine(const CallOptions& options,
                                                            const std::string& module,
                                                            const std::string& function,
                                                            const ModuleResolver& resolve);

// The call a JSON object names: "module" and "function" strings, "args" (specs) and "launch"
// ({"grid": [...], "block": [...], "shared_bytes": N}), taken out of `object` (the keys left are
// the caller's). `*module` is the module as the object gives it, for the caller to resolve into
// the call's module_id. INVALID_ARGUMENT saying what is missing or wrong.
absl::StatusOr<kprof::v1::FunctionCall> CallFromJson(Json& object, std::string* module);

// --collector NAME[:EVENT,EVENT...]
kprof::v1::CollectorSpec ParseCollector(const std::string& text);

}  // namespace kprof::client

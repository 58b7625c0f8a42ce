#include "client/cli/call_spec.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/json_input.h"
#include "google/protobuf/util/json_util.h"

namespace kprof::client {

bool IsModuleId(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

ModuleResolver UploadingTo(Client& client, const std::string& module_format) {
  return [&client, module_format](const std::string& module) -> absl::StatusOr<std::string> {
    if (module == "builtin" || IsModuleId(module)) return module;
    KPROF_ASSIGN_OR_RETURN(kprof::v1::ModuleInfo info,
                           client.LoadModuleFile(module, module_format));
    return info.id();
  };
}

CLI::Option* TakesSize(CLI::Option* option) {
  return option->transform(CLI::Validator(
      [](std::string& text) -> std::string {
        const std::optional<uint64_t> bytes = base::ParseByteSize(text);
        if (!bytes.has_value()) return absl::StrCat("'", text, "' is not ", base::kByteSizeForms);
        text = absl::StrCat(*bytes);
        return "";
      },
      "SIZE"));
}

void AddCallOptions(CLI::App& command, CallOptions& o) {
  command.add_option("--arg", o.args, "an argument spec, once per argument (float32[256,256])")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  o.grid_option = command.add_option("--grid", o.grid, "a CUDA kernel's grid: X[,Y[,Z]]");
  o.block_option = command.add_option("--block", o.block, "a CUDA kernel's block: X[,Y[,Z]]");
  o.shared_bytes_option = TakesSize(command.add_option(
      "--shared-bytes", o.shared_bytes, "a CUDA kernel's dynamic shared memory (48 KiB, 49152)"));
  command.add_option("--module-format", o.module_format,
                     "of a MODULE file: auto, shared-library, cubin, fatbin or ptx");
}

bool PlacementFlags::alignment_given() const {
  return alignment_option != nullptr && alignment_option->count() > 0;
}

void AddPlacementOptions(CLI::App& command, PlacementFlags& flags) {
  flags.alignment_option = TakesSize(command.add_option(
      "--tensor-alignment", flags.alignment, "each argument's address a multiple of SIZE (64)"));
  TakesSize(command.add_option("--tensor-offset", flags.offsets,
                               "SIZE past a 4096 boundary, for all or per argument: 0 or "
                               "0,256,512 (default: argument k at k*256)"))
      ->delimiter(',');
  command.add_flag("--huge-pages", flags.huge_pages,
                   "cpu: transparent huge pages for the arguments");
}

void AddPriorityOption(CLI::App& command, PriorityFlag& flag, bool batch) {
  command
      .add_option("--priority", flag.priority,
                  batch ? "interactive or batch (default): how the jobs queue among this "
                          "client's own; interactive ones go ahead of batch ones"
                        : "interactive (default) or batch: how the job queues among this client's "
                          "own; batch jobs make way for interactive ones")
      ->check(CLI::IsMember({"interactive", "batch"}));
}

bool LooksLikeArgSpec(const std::string& word) {
  if (word.find_first_of("[]") != std::string::npos) return true;
  // "float64:10", "int32x4:..." : a type name, then a colon.
  const size_t colon = word.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  for (const char* type : {"int", "uint", "float", "bfloat", "bool", "complex"}) {
    if (word.rfind(type, 0) == 0) return true;
  }
  return false;
}

absl::Status CheckArgWords(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const auto count = [&](char c) { return std::count(args[i].begin(), args[i].end(), c); };
    if (count('[') <= count(']')) continue;
    // The rest of the spec is in the words after it ("256]"), when the shell split it at its
    // spaces; a word that starts a spec of its own is not part of it.
    std::string whole = args[i];
    for (size_t j = i + 1;
         j < args.size() && !args[j].empty() &&
         !absl::ascii_isalpha(static_cast<unsigned char>(args[j][0])) &&
         std::count(whole.begin(), whole.end(), '[') > std::count(whole.begin(), whole.end(), ']');
         ++j) {
      whole += " " + args[j];
    }
    if (whole == args[i]) {
      return UsageError(absl::StrCat("--arg '", args[i],
                                     "' has a '[' without its ']' (a spec is TYPE[DIM,...], e.g. "
                                     "float32[256,256])"));
    }
    return UsageError(absl::StrCat(
        "--arg '", args[i],
        "' has a '[' without its ']': the shell cut the unquoted spec at a space; quote it "
        "(--arg '",
        whole, "') or leave the space out"));
  }
  return absl::OkStatus();
}

absl::StatusOr<kprof::v1::FunctionCall> CallFromCommandLine(const CallOptions& o,
                                                            const std::string& module,
                                                            const std::string& function,
                                                            const ModuleResolver& resolve) {
  KPROF_RETURN_IF_ERROR(CheckArgWords(o.args));
  kprof::v1::FunctionCall call;
  KPROF_ASSIGN_OR_RETURN(std::string id, resolve(module));
  call.set_module_id(id);
  call.set_function(function);
  for (const std::string& a : o.args) call.add_args(a);
  const bool grid = o.grid_option->count() > 0, block = o.block_option->count() > 0;
  if (!grid && !block && o.shared_bytes_option->count() == 0) return call;
  if (!grid || !block) return UsageError("a kernel launch needs both --grid and --block");
  kprof::v1::LaunchConfig* launch = call.mutable_launch();
  for (const auto& [name, text, dims] : {std::tuple{"grid", &o.grid, launch->mutable_grid()},
                                         std::tuple{"block", &o.block, launch->mutable_block()}}) {
    for (const absl::string_view part : absl::StrSplit(absl::string_view(*text), ',')) {
      int64_t value = 0;
      if (!absl::SimpleAtoi(part, &value)) {
        return UsageError(
            absl::StrCat("--", name, " '", *text, "': dimensions are integers, e.g. 256 or 64,64"));
      }
      dims->Add(value);
    }
  }
  launch->set_shared_bytes(o.shared_bytes);
  return call;
}

absl::StatusOr<kprof::v1::FunctionCall> CallFromJson(Json& object, std::string* module) {
  if (!object.value("module", Json()).is_string() ||
      !object.value("function", Json()).is_string()) {
    return absl::InvalidArgumentError("needs \"module\" and \"function\" strings");
  }
  *module = object["module"].get<std::string>();
  object.erase("module");
  // The call's own fields, read as protobuf reads JSON (so "launch" takes shared_bytes or
  // sharedBytes, and a field it does not have is refused).
  Json call = Json::object();
  for (const char* key : {"function", "args", "launch"}) {
    if (object.contains(key)) {
      call[key] = object[key];
      object.erase(key);
    }
  }
  kprof::v1::FunctionCall out;
  if (const absl::Status s = JsonToMessage(call, &out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("function, args or launch: ", s.message()));
  }
  return out;
}

kprof::v1::CollectorSpec ParseCollector(const std::string& text) {
  kprof::v1::CollectorSpec spec;
  const size_t colon = text.find(':');
  spec.set_name(text.substr(0, colon));
  if (colon != std::string::npos) {
    for (absl::string_view e : absl::StrSplit(text.substr(colon + 1), ',', absl::SkipEmpty())) {
      spec.add_options(std::string(e));
    }
  }
  return spec;
}

}  // namespace kprof::client

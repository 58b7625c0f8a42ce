// kprof unload MODULE...: the daemon forgets modules this client holds, each named by its id or
// by the file it was loaded from (whose bytes give the id).
#include <sys/stat.h>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "client/cli/call_spec.h"
#include "client/cli/command.h"
#include "client/cli/output.h"

namespace kprof::client {
namespace {

class UnloadCommand final : public Command {
 public:
  explicit UnloadCommand(CLI::App& app) : Command(app, "unload", "forget modules") {
    subcommand()
        ->add_option("MODULE", modules_,
                     "a module's id (kprof load printed it), or the file it was loaded from")
        ->required();
  }

  absl::Status Run(const Globals& globals, const std::string&, int*) override {
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, globals.Connect());
    for (const std::string& module : modules_) {
      std::string id = module;
      struct stat st {};
      const bool file =
          !IsModuleId(module) && module != "builtin" && stat(module.c_str(), &st) == 0;
      if (file) {
        KPROF_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile(module, "module file"));
        id = base::Sha256Hex(bytes);
      } else if (!IsModuleId(module) && module != "builtin") {
        return UsageError(absl::StrCat("'", module,
                                       "' is neither a module id (64 hex digits, as kprof load "
                                       "and kprof modules print) nor a file"));
      }
      // Each one said as it goes: a failure after the first leaves those before it unloaded.
      if (absl::Status s = client->UnloadModule(id); !s.ok()) {
        return absl::Status(
            s.code(),
            file ? absl::StrCat(module, " (module ", id, "): ", s.message()) : s.message());
      }
      PrintF("unloaded %s%s\n", id.c_str(), file ? (" (" + module + ")").c_str() : "");
      std::fflush(stdout);
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> modules_;
};

}  // namespace

std::unique_ptr<Command> AddUnloadCommand(CLI::App& app) {
  return std::make_unique<UnloadCommand>(app);
}

}  // namespace kprof::client

// kprof load FILE: uploads a module (when the daemon lacks it) and prints its id alone.
#include "CLI/CLI.hpp"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/output.h"

namespace kprof::client {
namespace {

class LoadCommand final : public Command {
 public:
  explicit LoadCommand(CLI::App& app) : Command(app, "load", "upload a module; prints its id") {
    subcommand()->add_option("FILE", file_, "a shared library, cubin, fatbin or PTX")->required();
    subcommand()->add_option("--module-format", format_,
                             "auto (default), shared-library, cubin, fatbin or ptx");
  }

  absl::Status Run(const Globals& globals, const std::string&, int*) override {
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, globals.Connect());
    KPROF_ASSIGN_OR_RETURN(kprof::v1::ModuleInfo m, client->LoadModuleFile(file_, format_));
    Print(m.id() + "\n");
    return absl::OkStatus();
  }

 private:
  std::string file_;
  std::string format_ = "auto";
};

}  // namespace

std::unique_ptr<Command> AddLoadCommand(CLI::App& app) {
  return std::make_unique<LoadCommand>(app);
}

}  // namespace kprof::client

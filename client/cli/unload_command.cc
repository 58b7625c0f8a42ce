// kprof unload ID: the daemon forgets a module this client holds.
#include "CLI/CLI.hpp"
#include "base/status_macros.h"
#include "client/cli/command.h"

namespace kprof::client {
namespace {

class UnloadCommand final : public Command {
 public:
  explicit UnloadCommand(CLI::App& app) : Command(app, "unload", "forget a module") {
    subcommand()->add_option("ID", id_, "the module's id (kprof load printed it)")->required();
  }

  absl::Status Run(const Globals& globals, const std::string&, int*) override {
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, globals.Connect());
    return client->UnloadModule(id_);
  }

 private:
  std::string id_;
};

}  // namespace

std::unique_ptr<Command> AddUnloadCommand(CLI::App& app) {
  return std::make_unique<UnloadCommand>(app);
}

}  // namespace kprof::client

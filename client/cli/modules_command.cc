// kprof modules: the modules the daemon holds for this client.
#include <cstdio>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/output.h"

namespace kprof::client {
namespace {

// A CSV field: quoted, its quotes doubled.
std::string CsvField(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

class ModulesCommand final : public Command {
 public:
  explicit ModulesCommand(CLI::App& app)
      : Command(app, "modules", "the modules the daemon holds for this client") {}

  absl::Status Run(const Globals& globals, const std::string& format, int*) override {
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, globals.Connect());
    KPROF_ASSIGN_OR_RETURN(auto modules, client->ListModules());
    if (format == "json") {
      kprof::v1::ListModulesResponse response;
      for (auto& m : modules) *response.add_modules() = m;
      Print(ProtoJson(response));
      return absl::OkStatus();
    }
    if (format == "csv") Print("id,name,format,size_bytes,functions\n");
    for (const auto& m : modules) {
      if (format == "csv") {
        Print(absl::StrCat(m.id(), ",", CsvField(m.name()), ",", m.format(), ",", m.size_bytes(),
                           ",", CsvField(absl::StrJoin(m.functions(), " ")), "\n"));
      } else {
        PrintF("%-64s  %-16s %10s  %s\n", m.id().c_str(), m.name().c_str(),
               base::FormatByteSize(m.size_bytes()).c_str(),
               absl::StrJoin(m.functions(), ", ").c_str());
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Command> AddModulesCommand(CLI::App& app) {
  return std::make_unique<ModulesCommand>(app);
}

}  // namespace kprof::client

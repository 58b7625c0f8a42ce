// The commands of kprof, each in a file of its own (info_command.cc, time_command.cc, ...): a
// command declares its subcommand, its positionals and its own options on the CLI11 app, and
// runs once the command line is parsed. What every command shares is here: the options of the
// connection (Globals), the output format, and usage errors.
//
//   kprof [GLOBAL OPTIONS] COMMAND [ARGS] [OPTIONS]
//
// An option of another command is a usage error naming the command it belongs to; global
// options may come before or after the command.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/farm.h"
#include "client/kprof_client.h"
#include "report/report.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kprof::client {

// "60s", "500ms", "2m" (absl::ParseDuration) or a bare number of seconds ("2", "0.5"), finite
// and not negative: what every option of a duration takes.
bool ParseDurationOrSeconds(const std::string& text, absl::Duration* duration);

// A usage error: INVALID_ARGUMENT, marked so that kprof exits 2 for it (1 for failed work).
absl::Status UsageError(absl::string_view message);
bool IsUsageError(const absl::Status& status);
// "UNAVAILABLE: message": a status as the CLI prints one, without its payloads.
std::string StatusLine(const absl::Status& status);

// The options of every command: where the daemon is, how to reach it, how long to wait, and the
// output format.
struct Globals {
  std::string target;  // "" until given: $KPROF_TARGET, else 127.0.0.1:9177
  std::string token_file, tls_ca, tls_cert, tls_key;
  std::string timeout;  // as given ("30s", "500ms", "2"); "" for each command's own
  std::string format;   // as given; "" for the command's default
  // The daemon the target names, with the credentials read; a target that names several
  // ("a:9177,b:9177") is a usage error naming them, for the commands that work with one
  // (load, unload, modules, lease).
  absl::StatusOr<std::unique_ptr<Client>> Connect() const;
  // The daemon to measure on `device` (time, profile): the target's one, or of several daemons
  // the first, in the target's order, that answers and has the device, said on stderr. None
  // that does: FAILED_PRECONDITION naming each daemon and why not.
  absl::StatusOr<std::unique_ptr<Client>> ConnectFor(const std::string& device) const;
  // Every daemon the target names (a farm), for batch and top.
  absl::StatusOr<std::unique_ptr<Farm>> ConnectFarm() const;
  // The addresses of the daemons the target names: several for "a:9177,b:9177" or a dns:///
  // name with several addresses, else the target itself.
  absl::StatusOr<std::vector<std::string>> Daemons() const;
  // A client of one of the addresses Daemons() gives, with the credentials read.
  absl::StatusOr<std::unique_ptr<Client>> ConnectTo(const std::string& address) const;
  // GetInfo of each of `daemons` (Daemons()), all asked at once, in their order; a daemon that
  // does not answer costs --timeout, else `unanswered` ("": the call's own default).
  std::vector<std::future<absl::StatusOr<kprof::v1::GetInfoResponse>>> AskInfo(
      const std::vector<std::string>& daemons, const std::string& unanswered = "") const;
  // The target the commands connect to: --target, else $KPROF_TARGET, else 127.0.0.1:9177.
  std::string ResolvedTarget() const;
  // --timeout, or `otherwise` when it is not given.
  absl::Duration TimeoutOr(absl::Duration otherwise) const;
};

// What to do about a failed call, when its status says what went wrong with the connection
// rather than the call: no daemon at the target, a daemon that speaks TLS to a plaintext
// client, a TLS handshake that failed. "" when there is nothing to add.
std::string ConnectionAdvice(const absl::Status& status, const Globals& globals);

// Declares the global options on `app`. Their values are checked by CheckGlobals once parsed.
void AddGlobalOptions(CLI::App& app, Globals& globals);
absl::Status CheckGlobals(const Globals& globals);

// One command: constructed with the app (it adds its subcommand), run if its subcommand was the
// one given.
class Command {
 public:
  virtual ~Command() = default;
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  CLI::App* subcommand() const { return subcommand_; }
  // The formats --format may take for this command, the default first.
  const std::vector<std::string>& formats() const { return formats_; }

  // Runs the command with `format`, one of formats(). *exit_code is the exit status of a
  // failure that is not a usage error (1 unless the command says otherwise).
  virtual absl::Status Run(const Globals& globals, const std::string& format, int* exit_code) = 0;

 protected:
  Command(CLI::App& app, const std::string& name, const std::string& description,
          std::vector<std::string> formats = {"table", "json", "csv"});

 private:
  CLI::App* subcommand_;
  std::vector<std::string> formats_;
};

// --no-aggregate, --no-sort and --no-sums: how a report's table is shaped (profile, report).
struct TableFlags {
  bool no_aggregate = false, no_sort = false, no_sums = false;
  report::TableOptions options() const;
};
void AddTableFlags(CLI::App& command, TableFlags& flags);

// The commands, in the order `kprof --help` lists them.
std::vector<std::unique_ptr<Command>> AddCommands(CLI::App& app);

std::unique_ptr<Command> AddInfoCommand(CLI::App& app);
std::unique_ptr<Command> AddLoadCommand(CLI::App& app);
std::unique_ptr<Command> AddModulesCommand(CLI::App& app);
std::unique_ptr<Command> AddUnloadCommand(CLI::App& app);
std::unique_ptr<Command> AddTimeCommand(CLI::App& app);
std::unique_ptr<Command> AddProfileCommand(CLI::App& app);
std::unique_ptr<Command> AddBatchCommand(CLI::App& app);
std::unique_ptr<Command> AddReportCommand(CLI::App& app);
std::unique_ptr<Command> AddCompareCommand(CLI::App& app);
std::unique_ptr<Command> AddRankCommand(CLI::App& app);
std::unique_ptr<Command> AddLeaseCommand(CLI::App& app);
std::unique_ptr<Command> AddTopCommand(CLI::App& app);

}  // namespace kprof::client

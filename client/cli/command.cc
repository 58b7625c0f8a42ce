#include "client/cli/command.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <tuple>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/device.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "base/tls_files.h"

namespace kprof::client {
namespace {

constexpr char kUsagePayload[] = "kprof.dev/usage-error";

// 0 is the command's own default.
absl::StatusOr<absl::Duration> ParseTimeout(const std::string& text) {
  if (absl::Duration duration; ParseDurationOrSeconds(text, &duration)) return duration;
  return UsageError(absl::StrCat("--timeout '", text,
                                 "' is not a duration (e.g. 30s, 500ms, 2m; a bare number is "
                                 "seconds)"));
}

// Reads the token and TLS files the options name into `options`.
// The token: the first in --token-file, else $KPROF_TOKEN, else the first in $KPROF_TOKEN_FILE,
// as the Python client's connect() looks for it.
absl::Status Credentials(const Globals& given, ClientOptions* options) {
  // TLS files from the environment where the options do not name them (kprof lease passes
  // them on to its command so).
  Globals g = given;
  // Where each came from, for the messages about them.
  std::string ca_option = "--tls-ca", cert_option = "--tls-cert", key_option = "--tls-key";
  for (auto [value, name, option] : {std::tuple{&g.tls_ca, "KPROF_TLS_CA", &ca_option},
                                     std::tuple{&g.tls_cert, "KPROF_TLS_CERT", &cert_option},
                                     std::tuple{&g.tls_key, "KPROF_TLS_KEY", &key_option}}) {
    if (const char* env = std::getenv(name); value->empty() && env != nullptr) {
      *value = env;
      *option = std::string("$") + name;
    }
  }
  std::string token_file = g.token_file;
  if (token_file.empty()) {
    if (const char* env = std::getenv("KPROF_TOKEN"); env != nullptr && *env != '\0') {
      options->bearer_token = env;
    } else if (const char* file = std::getenv("KPROF_TOKEN_FILE"); file != nullptr) {
      token_file = file;
    }
  }
  if (!token_file.empty()) {
    KPROF_ASSIGN_OR_RETURN(std::string text, base::ReadFile(token_file, "token file"));
    // A line of the daemon's token file is TOKEN [LABEL [WEIGHT]]: the token is its first word.
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      const std::vector<absl::string_view> words =
          absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
      if (!words.empty() && words[0][0] != '#') {
        options->bearer_token = std::string(words[0]);
        break;
      }
    }
    if (options->bearer_token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the token file '", token_file, "' holds no token"));
    }
  }
  options->tls = !g.tls_ca.empty() || !g.tls_cert.empty();
  if (!g.tls_ca.empty()) {
    KPROF_ASSIGN_OR_RETURN(options->tls_root_certs_pem,
                           base::ReadCertificates(g.tls_ca, ca_option));
  }
  if (!g.tls_cert.empty()) {
    // Checked here: gRPC would log the TLS library's complaint and fail as "empty address list".
    KPROF_ASSIGN_OR_RETURN(base::TlsPair pair,
                           base::ReadTlsPair(g.tls_cert, g.tls_key, cert_option, key_option));
    options->tls_cert_chain_pem = std::move(pair.cert_pem);
    options->tls_private_key_pem = std::move(pair.key_pem);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, ClientOptions>> Connection(const Globals& g) {
  std::string target = g.ResolvedTarget();
  ClientOptions options;
  if (!g.timeout.empty()) {
    KPROF_ASSIGN_OR_RETURN(const absl::Duration timeout, ParseTimeout(g.timeout));
    if (timeout > absl::ZeroDuration()) options.timeout = timeout;
  }
  KPROF_RETURN_IF_ERROR(Credentials(g, &options));
  return std::pair{std::move(target), std::move(options)};
}

}  // namespace

absl::Status UsageError(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayload, absl::Cord("2"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayload).has_value();
}

std::string StatusLine(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

absl::StatusOr<std::vector<std::string>> Globals::Daemons() const {
  // A dns:/// name is one target here, whatever it resolves to (gRPC picks an address, and TLS
  // checks the name); batch and top take it as a farm.
  const std::string resolved = ResolvedTarget();
  if (resolved.find(',') == std::string::npos && absl::StartsWith(resolved, "dns:")) {
    return std::vector<std::string>{resolved};
  }
  // HOST:PORT each: a bare host dialled port 0, a URL asked DNS for "http://...".
  return ResolveTarget(resolved);
}

absl::StatusOr<std::unique_ptr<Client>> Globals::ConnectTo(const std::string& address) const {
  KPROF_ASSIGN_OR_RETURN(auto connection, Connection(*this));
  return Client::Connect(address, connection.second);
}

std::vector<std::future<absl::StatusOr<kprof::v1::GetInfoResponse>>> Globals::AskInfo(
    const std::vector<std::string>& daemons, const std::string& unanswered) const {
  Globals asking = *this;
  if (asking.timeout.empty()) asking.timeout = unanswered;
  std::vector<std::future<absl::StatusOr<kprof::v1::GetInfoResponse>>> answers;
  for (const std::string& address : daemons) {
    answers.push_back(std::async(std::launch::async, [asking, address] {
      absl::StatusOr<std::unique_ptr<Client>> client = asking.ConnectTo(address);
      if (!client.ok()) return absl::StatusOr<kprof::v1::GetInfoResponse>(client.status());
      return (*client)->Info();
    }));
  }
  return answers;
}

absl::StatusOr<std::unique_ptr<Client>> Globals::Connect() const {
  KPROF_ASSIGN_OR_RETURN(auto connection, Connection(*this));
  if (connection.first.find(',') != std::string::npos) {
    KPROF_ASSIGN_OR_RETURN(const std::vector<std::string> daemons, Daemons());
    if (daemons.size() > 1) {
      return UsageError(absl::StrCat(
          "the target names ", daemons.size(), " daemons (", absl::StrJoin(daemons, ", "),
          "); this command works with one: give it as --target (kprof batch spreads jobs over "
          "several, kprof time, profile and info pick or list them)"));
    }
  }
  return Client::Connect(connection.first, connection.second);
}

absl::StatusOr<std::unique_ptr<Client>> Globals::ConnectFor(const std::string& given) const {
  KPROF_ASSIGN_OR_RETURN(const std::vector<std::string> daemons, Daemons());
  if (daemons.size() == 1) return ConnectTo(daemons.front());
  // As the daemons name their devices: "cuda" is "cuda:0". A name that is no device's goes to
  // the first daemon that answers, whose refusal says what is accepted, as with one daemon.
  const absl::StatusOr<base::Device> parsed = base::ParseDevice(given.empty() ? "cpu:0" : given);
  const std::string device = parsed.ok() ? base::DeviceSpec(*parsed) : given;
  // Each asked at once what it has; the first in the target's order that answers with the
  // device is the one.
  auto answers = AskInfo(daemons, "5s");
  std::vector<std::string> why_not;
  for (size_t i = 0; i < daemons.size(); ++i) {
    const absl::StatusOr<kprof::v1::GetInfoResponse> info = answers[i].get();
    if (!info.ok()) {
      why_not.push_back(absl::StrCat(daemons[i], ": ", StatusLine(info.status())));
      continue;
    }
    std::vector<std::string> has;
    for (const auto& d : info->devices()) has.push_back(d.device());
    if (parsed.ok() && std::find(has.begin(), has.end(), device) == has.end()) {
      why_not.push_back(absl::StrCat(daemons[i], " has ", absl::StrJoin(has, ", ")));
      continue;
    }
    for (size_t rest = i + 1; rest < daemons.size(); ++rest) answers[rest].wait();
    std::fprintf(stderr, "kprof: on %s (%s), the first of the target's %zu daemons %s\n",
                 daemons[i].c_str(), info->host().c_str(), daemons.size(),
                 parsed.ok() ? ("with " + device).c_str() : "that answered");
    return ConnectTo(daemons[i]);
  }
  return absl::FailedPreconditionError(absl::StrCat("none of the target's ", daemons.size(),
                                                    " daemons can measure on ", device, ": ",
                                                    absl::StrJoin(why_not, "; ")));
}

absl::StatusOr<std::unique_ptr<Farm>> Globals::ConnectFarm() const {
  KPROF_ASSIGN_OR_RETURN(auto connection, Connection(*this));
  return Farm::Connect(connection.first, connection.second);
}

std::string ConnectionAdvice(const absl::Status& status, const Globals& globals) {
  if (!absl::IsUnavailable(status)) return "";
  const absl::string_view message = status.message();
  const bool tls = !globals.tls_ca.empty() || !globals.tls_cert.empty() ||
                   std::getenv("KPROF_TLS_CA") != nullptr;
  const auto says = [message](std::initializer_list<absl::string_view> words) {
    return std::any_of(words.begin(), words.end(),
                       [message](absl::string_view w) { return absl::StrContains(message, w); });
  };
  if (tls && says({"andshake", "SSL", "ertificate", "TLS"})) {
    return "the TLS handshake failed: is --tls-ca the CA that signed the daemon's certificate, "
           "and does the certificate name the host in --target? (with mutual TLS, --tls-cert "
           "and --tls-key too)";
  }
  if (!tls && says({"Socket closed", "Connection reset", "Broken pipe", "End of TCP stream"})) {
    return absl::StrCat("the daemon at ", globals.ResolvedTarget(),
                        " closed the connection: it may speak TLS; pass --tls-ca with the CA "
                        "that signed its certificate");
  }
  if (says({"Connection refused", "ailed to connect", "connections to all backends failing",
            "DNS resolution failed", "No route to host"})) {
    return absl::StrCat("is kprofd running at ", globals.ResolvedTarget(),
                        "? (--target, or $KPROF_TARGET, names the daemon)");
  }
  return "";
}

std::string Globals::ResolvedTarget() const {
  if (!target.empty()) return target;
  const char* env = std::getenv("KPROF_TARGET");
  return env != nullptr && *env ? env : "127.0.0.1:9177";
}

bool ParseDurationOrSeconds(const std::string& text, absl::Duration* duration) {
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds) && seconds >= 0 && seconds < 1e9) {
    *duration = absl::Seconds(seconds);
    return true;
  }
  return absl::ParseDuration(text, duration) && *duration >= absl::ZeroDuration() &&
         *duration != absl::InfiniteDuration();
}

absl::Duration Globals::TimeoutOr(absl::Duration otherwise) const {
  if (timeout.empty()) return otherwise;
  const absl::StatusOr<absl::Duration> parsed = ParseTimeout(timeout);
  // CheckGlobals refused a bad one; 0 asks for the default.
  return parsed.ok() && *parsed > absl::ZeroDuration() ? *parsed : otherwise;
}

void AddGlobalOptions(CLI::App& app, Globals& g) {
  app.add_option("--target", g.target, "the daemon, HOST:PORT ($KPROF_TARGET, 127.0.0.1:9177)")
      ->group("Global options");
  app.add_option("--timeout", g.timeout, "deadline of a call: 30s, 500ms, 2m (default per command)")
      ->group("Global options");
  app.add_option("--token-file", g.token_file,
                 "send the first token in FILE as a bearer token ($KPROF_TOKEN_FILE)")
      ->group("Global options");
  app.add_option("--tls-ca", g.tls_ca, "use TLS, trusting this CA (PEM)")->group("Global options");
  app.add_option("--tls-cert", g.tls_cert, "client certificate for mutual TLS (PEM)")
      ->group("Global options");
  app.add_option("--tls-key", g.tls_key, "the key of --tls-cert (PEM)")->group("Global options");
  app.add_option("--format", g.format,
                 "output: table, json, csv; gbench (time, batch); trace, html (profile, report)")
      ->group("Global options");
}

absl::Status CheckGlobals(const Globals& g) {
  if (!g.timeout.empty()) KPROF_RETURN_IF_ERROR(ParseTimeout(g.timeout).status());
  if (g.tls_cert.empty() != g.tls_key.empty()) {
    return UsageError("--tls-cert and --tls-key go together");
  }
  return absl::OkStatus();
}

Command::Command(CLI::App& app, const std::string& name, const std::string& description,
                 std::vector<std::string> formats)
    : subcommand_(app.add_subcommand(name, description)), formats_(std::move(formats)) {
  // Global options may follow the command: what it does not know goes to the app.
  subcommand_->fallthrough();
}

report::TableOptions TableFlags::options() const {
  report::TableOptions table;
  table.aggregate = !no_aggregate;
  table.sort = !no_sort;
  table.compute_col_sums = !no_sums;
  return table;
}

void AddTableFlags(CLI::App& command, TableFlags& flags) {
  command.add_flag("--no-aggregate", flags.no_aggregate, "table: one row per call");
  command.add_flag("--no-sort", flags.no_sort, "table: keep the calls' order");
  command.add_flag("--no-sums", flags.no_sums, "table: no Sum row");
}

std::vector<std::unique_ptr<Command>> AddCommands(CLI::App& app) {
  std::vector<std::unique_ptr<Command>> commands;
  for (auto add : {AddInfoCommand, AddLoadCommand, AddModulesCommand, AddUnloadCommand,
                   AddTimeCommand, AddProfileCommand, AddBatchCommand, AddReportCommand,
                   AddCompareCommand, AddRankCommand, AddLeaseCommand, AddTopCommand}) {
    commands.push_back(add(app));
  }
  return commands;
}

}  // namespace kprof::client

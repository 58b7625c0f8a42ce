// kprof: the command-line client of kprofd. Each command is a file of its own (command.h); this
// parses the command line with CLI11, turns its errors into one line naming what was wrong, and
// runs the command given.
//
// Machine-readable output goes to stdout; a failure is one line on stderr, "kprof: CODE:
// message", and a non-zero exit: 2 for a usage error, 1 for failed work, 3 when some of a
// batch's jobs failed, 4 past compare's --fail-on-regression.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/nearest.h"
#include "client/cli/call_spec.h"
#include "client/cli/command.h"
#include "client/cli/output.h"
#include "kprof/config.h"

namespace kprof::client {
namespace {

constexpr char kFooter[] =
    "MODULE is a file (uploaded when the daemon lacks it), a module id, or 'builtin'.\n"
    "The target defaults to $KPROF_TARGET, else 127.0.0.1:9177; global options may also follow\n"
    "the command. `kprof COMMAND --help` lists a command's arguments and options.\n"
    "Exit status: 0 done, 1 failed, 2 a usage error, 3 some of a batch's jobs failed, 4 compare\n"
    "found a regression past --fail-on-regression.";

std::string CommandNames(const std::vector<std::unique_ptr<Command>>& commands) {
  std::vector<std::string> names;
  for (const auto& c : commands) names.push_back(c->subcommand()->get_name());
  return absl::StrJoin(names, ", ");
}

Command* Given(const std::vector<std::unique_ptr<Command>>& commands) {
  for (const auto& c : commands) {
    if (c->subcommand()->parsed()) return c.get();
  }
  return nullptr;
}

// "usage: kprof time [OPTIONS] MODULE FUNCTION", as the command's help gives it.
std::string Usage(const Command* command, const CLI::App& app) {
  const std::string help = command != nullptr ? command->subcommand()->help() : app.help();
  const size_t at = help.find("Usage: ");
  if (at == std::string::npos) return "kprof --help";
  const size_t end = help.find('\n', at);
  std::string usage = help.substr(at + 7, end == std::string::npos ? end : end - at - 7);
  if (usage.rfind("kprof", 0) != 0) usage = "kprof " + usage;
  return "usage: " + usage;
}

// "did you mean --repeat? " for a slip of one of the command's options (or kprof's own), else "".
std::string NearestOption(const std::string& option, const Command* command, const CLI::App& app) {
  std::vector<std::string> names;
  const CLI::App* const scopes[] = {command != nullptr ? command->subcommand() : nullptr, &app};
  for (const CLI::App* scope : scopes) {
    if (scope == nullptr) continue;
    for (const CLI::Option* known : scope->get_options()) {
      for (const std::string& name : known->get_lnames()) names.push_back("--" + name);
    }
  }
  const std::string near = base::Nearest(option, names);
  return near.empty() ? "" : absl::StrCat("did you mean ", near, "? ");
}

// A parse error as one line that says what was wrong and where to look.
absl::Status ParseFailure(const CLI::ParseError& error, const CLI::App& app,
                          const std::vector<std::unique_ptr<Command>>& commands) {
  const Command* command = Given(commands);
  const std::string name = command != nullptr ? command->subcommand()->get_name() : "";
  const std::string where = name.empty() ? "kprof" : "kprof " + name;
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    const std::vector<std::string> extras = app.remaining(true);
    for (const std::string& extra : extras) {
      if (extra.rfind("-", 0) != 0) continue;
      const std::string option = extra.substr(0, extra.find('='));
      std::vector<std::string> owners;
      for (const auto& c : commands) {
        if (c->subcommand()->get_option_no_throw(option) != nullptr) {
          owners.push_back(c->subcommand()->get_name());
        }
      }
      if (owners.empty()) {
        return UsageError(absl::StrCat("unknown option '", option, "' (",
                                       NearestOption(option, command, app), where,
                                       " --help lists the options)"));
      }
      if (name.empty() || std::find(owners.begin(), owners.end(), name) != owners.end()) {
        return UsageError(absl::StrCat(option, " is an option of ", absl::StrJoin(owners, ", "),
                                       ": give it after the command"));
      }
      return UsageError(absl::StrCat(option, " is not an option of '", where,
                                     "' (it is one of: ", absl::StrJoin(owners, ", "), "; ", where,
                                     " --help lists its own)"));
    }
    if (!extras.empty() && name.empty()) {
      return UsageError(absl::StrCat("unknown command '", extras[0],
                                     "' (accepted: ", CommandNames(commands), ")"));
    }
    if (!extras.empty() && LooksLikeArgSpec(extras[0])) {
      return UsageError(absl::StrCat(
          "unexpected argument '", extras[0], "' for '", where,
          "': an argument spec goes after --arg, once per argument (--arg 'float32[256,256]'; "
          "quoted, as a spec with a space or brackets must be)"));
    }
    if (!extras.empty()) {
      return UsageError(absl::StrCat("unexpected argument '", extras[0], "' for '", where, "' (",
                                     where, " --help lists its arguments)"));
    }
  }
  // CLI11's own words for an option given twice ("--format: At Most 1 required but received
  // 2") said plainly.
  const std::string what = error.what();
  if (const size_t at = what.find(": At Most 1 required but received "); at != std::string::npos) {
    return UsageError(
        absl::StrCat(what.substr(0, at), " is given ",
                     what.substr(at + std::string(": At Most 1 required but received ").size()),
                     " times: give it once (", Usage(command, app), ")"));
  }
  return UsageError(absl::StrCat(what, " (", Usage(command, app), ")"));
}

// "a", "a and b", "a, b and c".
std::string Listed(const std::vector<std::string>& names) {
  if (names.size() < 2) return absl::StrJoin(names, "");
  return absl::StrCat(absl::StrJoin(names.begin(), names.end() - 1, ", "), " and ", names.back());
}

absl::Status CheckFormat(const Command& command, const std::string& format,
                         const std::vector<std::unique_ptr<Command>>& commands) {
  const std::vector<std::string>& accepted = command.formats();
  if (format.empty() || std::find(accepted.begin(), accepted.end(), format) != accepted.end()) {
    return absl::OkStatus();
  }
  const std::string name = command.subcommand()->get_name();
  std::vector<std::string> owners;
  for (const auto& c : commands) {
    const std::vector<std::string>& f = c->formats();
    if (std::find(f.begin(), f.end(), format) != f.end()) {
      owners.push_back(c->subcommand()->get_name());
    }
  }
  if (!owners.empty()) {
    return UsageError(absl::StrCat("--format ", format, " is for ", Listed(owners), ", not ", name,
                                   " (", name, " takes ", Listed(accepted), ")"));
  }
  return UsageError(absl::StrCat("--format '", format, "' is not one of ",
                                 absl::StrJoin(accepted, ", "), " (for kprof ", name, ")"));
}

int Main(int argc, char** argv) {
  CLI::App app("kprof: the command-line client of kprofd", "kprof");
  app.set_help_flag("--help,-h", "print this help; COMMAND --help prints a command's");
  app.set_version_flag("--version", absl::StrCat("kprof ", KPROF_VERSION, " (", KPROF_BUILD, ")"));
  app.footer(kFooter);
  Globals globals;
  AddGlobalOptions(app, globals);
  const std::vector<std::unique_ptr<Command>> commands = AddCommands(app);
  // One command: after it, a command's name is an argument like any other.
  app.require_subcommand(0, 1);

  absl::Status status;
  int exit_code = 1;
  Command* command = nullptr;
  try {
    app.parse(argc, argv);
    command = Given(commands);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion&) {
    std::printf("kprof %s (%s)\n", KPROF_VERSION, KPROF_BUILD);
    return 0;
  } catch (const CLI::ParseError& e) {
    status = ParseFailure(e, app, commands);
  }
  if (status.ok() && command == nullptr) {
    status = UsageError("no command (kprof --help lists them)");
  }
  if (status.ok()) status = CheckFormat(*command, globals.format, commands);
  if (status.ok()) status = CheckGlobals(globals);
  if (status.ok()) {
    const std::string format = globals.format.empty() ? command->formats()[0] : globals.format;
    status = command->Run(globals, format, &exit_code);
  }
  std::fflush(stdout);
  if (status.ok()) return 0;
  // The code and message alone: a usage error's mark is not for the person reading.
  std::fprintf(stderr, "kprof: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               Printable(std::string(status.message())).c_str());
  if (const std::string advice = ConnectionAdvice(status, globals); !advice.empty()) {
    std::fprintf(stderr, "kprof: %s\n", advice.c_str());
  }
  return IsUsageError(status) ? 2 : exit_code;
}

}  // namespace
}  // namespace kprof::client

int main(int argc, char** argv) { return kprof::client::Main(argc, argv); }

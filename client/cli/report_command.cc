// kprof report FILE.json: renders a standard JSON report (from kprofd or from TVM).
#include "CLI/CLI.hpp"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/output.h"

namespace kprof::client {
namespace {

class ReportCommand final : public Command {
 public:
  explicit ReportCommand(CLI::App& app)
      : Command(app, "report", "render a standard JSON report (from kprofd or TVM)",
                {"table", "json", "csv", "trace", "html"}) {
    subcommand()->add_option("FILE", file_, "the report, as JSON")->required();
    AddTableFlags(*subcommand(), table_);
  }

  absl::Status Run(const Globals&, const std::string& format, int*) override {
    KPROF_ASSIGN_OR_RETURN(std::string text, base::ReadFile(file_, "report file"));
    KPROF_ASSIGN_OR_RETURN(report::Report report, report::ReportFromJson(text));
    PrintReport(report, format, table_.options());
    return absl::OkStatus();
  }

 private:
  std::string file_;
  TableFlags table_;
};

}  // namespace

std::unique_ptr<Command> AddReportCommand(CLI::App& app) {
  return std::make_unique<ReportCommand>(app);
}

}  // namespace kprof::client

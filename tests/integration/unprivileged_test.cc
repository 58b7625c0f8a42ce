// kprofd as the systemd unit runs it: an unprivileged user. Where the test runs as root, the
// daemon runs as nobody (setpriv), from copies of its binaries that user may execute. Counters
// of what the kernel does on the thread's behalf must count there too, never read 0.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <variant>

#include "absl/strings/match.h"
#include "client/kprof_client.h"
#include "core/collectors/papi_collector.h"
#include "core/collectors/perf_collector.h"
#include "core/collectors/rusage_collector.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "proto/wire.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

int PerfEventParanoid() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int paranoid = 2;
  in >> paranoid;
  return paranoid;
}

class UnprivilegedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);
    // kprofd finds its worker beside itself.
    const fs::path kprofd = ::kprof::testing::KprofdPath();
    const fs::path bin = fs::path(dir_.path()) / "bin";
    fs::create_directory(bin);
    fs::permissions(bin, fs::perms::all);
    for (const fs::path& from : {kprofd, kprofd.parent_path() / "kprofd-worker"}) {
      fs::copy_file(from, bin / from.filename());
    }
    daemon_.set_program((bin / "kprofd").string());
    if (geteuid() == 0) {
      daemon_.set_launcher({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "--inh-caps=-all"});
    }
    daemon_.set_stderr(dir_.path() + "/kprofd.err");
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache")) << "status " << daemon_.exit_status();
    auto connected = client::Client::Connect(daemon_.target());
    ASSERT_THAT(connected, IsOk());
    client_ = std::move(*connected);
    auto module = client_->LoadModuleFile(TestModulePath("kernel_side"));
    ASSERT_THAT(module, IsOk());
    module_ = module->id();
    // Unprivileged, the kernel counts kernel-mode events only at perf_event_paranoid <= 1.
    kernel_counted_ = PerfEventParanoid() <= 1;
  }

  // One ProfileFunction of `function`(`arg`), `number` calls, under perf's `events` and rusage.
  report::MetricMap Profile(const std::string& function, const std::string& arg, int number,
                            const std::vector<std::string>& events) {
    v1::ProfileFunctionRequest request;
    request.mutable_call()->set_module_id(module_);
    request.mutable_call()->set_function(function);
    request.mutable_call()->add_args(arg);
    request.set_number(number);
    request.add_collectors()->set_name("rusage");
    auto* perf = request.add_collectors();
    perf->set_name("perf");
    for (const std::string& e : events) perf->add_options(e);
    auto response = client_->ProfileFunction(request);
    EXPECT_THAT(response, IsOk());
    if (!response.ok()) return {};
    auto report = wire::FromProto(response->report());
    EXPECT_THAT(report, IsOk());
    if (!report.ok() || report->calls.size() != 1) return {};
    return report->calls[0];
  }

  static int64_t CountOf(const report::MetricMap& m, std::string_view name) {
    const auto it = m.find(name);
    if (it == m.end() || !std::holds_alternative<report::Count>(it->second)) return -1;
    return std::get<report::Count>(it->second).value;
  }

  void ExpectDomain(const report::MetricMap& m, const std::string& accounted) {
    const auto it = m.find(core::kPerfDomainMetric);
    ASSERT_NE(it, m.end());
    const std::string domain = std::get<std::string>(it->second);
    if (kernel_counted_) {
      EXPECT_EQ(domain, "user and kernel");
    } else {
      EXPECT_THAT(domain, HasSubstr("user (perf_event_paranoid excludes the kernel)"));
      EXPECT_THAT(domain, HasSubstr(accounted + " from the thread's accounting"));
    }
  }

  TempDir dir_;
  Daemon daemon_;
  std::unique_ptr<client::Client> client_;
  std::string module_;
  bool kernel_counted_ = false;
};

TEST_F(UnprivilegedTest, TheDaemonRunsAsAnUnprivilegedUser) {
  std::ifstream status("/proc/" + std::to_string(daemon_.pid()) + "/status");
  std::string line;
  while (std::getline(status, line) && line.rfind("Uid:", 0) != 0) {
  }
  ASSERT_THAT(line, HasSubstr("Uid:"));
  EXPECT_THAT(line, ::testing::Not(::testing::MatchesRegex("Uid:\\s+0\\s.*")));
}

// 4 calls of 5 sleeps: at least 20 switches, by perf as by rusage.
TEST_F(UnprivilegedTest, ContextSwitchesCount) {
  const report::MetricMap m =
      Profile("sleeps", "float64:5", 4, {"context-switches", "cpu-migrations", "task-clock"});
  const int64_t rusage =
      CountOf(m, core::kVoluntarySwitchesMetric) + CountOf(m, core::kInvoluntarySwitchesMetric);
  EXPECT_GE(rusage, 20);
  EXPECT_GE(CountOf(m, "context-switches"), 20);
  EXPECT_GE(CountOf(m, "context-switches"), rusage * 9 / 10);
  EXPECT_GE(CountOf(m, "cpu-migrations"), 0);
  EXPECT_GT(CountOf(m, "task-clock"), 0);
  ExpectDomain(m, "context-switches, cpu-migrations");
}

// 2000 fresh pages filled by read(): each faults while the kernel copies into it.
TEST_F(UnprivilegedTest, FaultsTakenInTheKernelCount) {
  const report::MetricMap m =
      Profile("faults_through_read", "float64:2000", 1, {"page-faults", "minor-faults"});
  EXPECT_GE(CountOf(m, core::kMinorFaultsMetric), 2000);
  EXPECT_GE(CountOf(m, "page-faults"), 2000);
  EXPECT_GE(CountOf(m, "minor-faults"), 2000);
  ExpectDomain(m, "page-faults, minor-faults");
}

// Through PAPI: task-clock counts in user mode, and a kernel-side event is refused by name
// rather than read as 0 (PAPI's perf_event component counts user mode unless told otherwise).
TEST_F(UnprivilegedTest, PapiCountsTheDomainItMayOrRefuses) {
  const auto profile = [&](const std::string& event) {
    v1::ProfileFunctionRequest request;
    request.mutable_call()->set_module_id(module_);
    request.mutable_call()->set_function("sleeps");
    request.mutable_call()->add_args("float64:5");
    auto* papi = request.add_collectors();
    papi->set_name("papi");
    papi->add_options(event);
    return client_->ProfileFunction(request);
  };
  auto clock = profile("perf::TASK-CLOCK");
  if (!clock.ok() && absl::StrContains(clock.status().message(), "component perf_event disabled")) {
    // libpfm4 knows no PMU of this CPU, and PAPI then counts no perf event at all: the refusal
    // names the event and PAPI's reason.
    EXPECT_THAT(clock, ::kprof::testing::StatusIs(
                           absl::StatusCode::kFailedPrecondition,
                           HasSubstr("PAPI event 'perf::TASK-CLOCK' cannot be counted on this "
                                     "host")));
    GTEST_SKIP() << "PAPI's perf_event component is disabled here: " << clock.status();
  }
  auto switches = profile("perf::CONTEXT-SWITCHES");
  if (kernel_counted_) {
    ASSERT_THAT(switches, IsOk());
  } else {
    EXPECT_THAT(switches, ::kprof::testing::StatusIs(
                              absl::StatusCode::kFailedPrecondition,
                              HasSubstr("PAPI event 'perf::CONTEXT-SWITCHES' cannot be counted as "
                                        "asked")));
  }
  clock = profile("perf::TASK-CLOCK");
  if (!clock.ok() && absl::StrContains(clock.status().message(), "perf_event")) {
    GTEST_SKIP() << "PAPI's perf_event component is not here: " << clock.status();
  }
  ASSERT_THAT(clock, IsOk());
  auto report = wire::FromProto(clock->report());
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->calls.size(), 1u);
  EXPECT_GT(CountOf(report->calls[0], "perf::TASK-CLOCK"), 0);
  EXPECT_EQ(std::get<std::string>(report->calls[0].at(std::string(core::kPapiDomainMetric))),
            kernel_counted_ ? "user and kernel" : "user (perf_event_paranoid excludes the kernel)");
}

}  // namespace
}  // namespace kprof

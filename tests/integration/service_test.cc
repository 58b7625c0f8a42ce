// kprofd end to end: a real daemon on 127.0.0.1:0, real worker processes, the client library.
// The host it describes, the requests it refuses and how, crashes and shutdown.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "client/kprof_client.h"
#include "core/collectors/perf_collector.h"
#include "core/collectors/rapl_collector.h"
#include "core/cuda/cuda_devices.h"
#include "core/host/placement.h"
#include "daemon.h"
#include "emulation.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "kprof/config.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "process_info.h"
#include "proto/status.h"
#include "proto/wire.h"
#include "service_fixture.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::ServiceTest;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST_F(ServiceTest, InfoDescribesTheHost) {
  auto info = client_->Info();
  ASSERT_THAT(info, IsOk());
  EXPECT_FALSE(info->version().empty());
  ASSERT_THAT(info->devices(), Not(IsEmpty()));  // cpu:0 first, then any GPUs
  EXPECT_EQ(info->devices(0).device(), "cpu:0");
  EXPECT_GE(info->devices(0).cpus(), 1);
  EXPECT_EQ(info->devices(0).collectors(0).name(), "rusage");
  EXPECT_EQ(info->devices(0).collectors(1).name(), "perf");
  if (::kprof::testing::Emulator().empty()) {  // qemu-user has no perf_event_open
    const v1::CollectorInfo& perf = info->devices(0).collectors(1);
    EXPECT_TRUE(perf.available()) << perf.reason();
    // Each event is listed where it counts here, or with why not: a host without a PMU (this
    // VM) counts the software events and none of the hardware ones.
    EXPECT_THAT(perf.metrics(), Contains("task-clock"));
    EXPECT_EQ(perf.metrics_size() + perf.uncountable_size(),
              static_cast<int>(core::PerfCollector::KnownEvents().size()));
    const bool pmu = core::HostHasCpuPmu();
    for (const auto& u : perf.uncountable()) {
      EXPECT_THAT(perf.metrics(), Not(Contains(u.name())));
      if (!pmu) {
        EXPECT_THAT(u.reason(), HasSubstr("no performance-monitoring unit")) << u.name();
      }
    }
    if (!pmu) {
      EXPECT_THAT(perf.metrics(), Not(Contains("cycles")));
      ASSERT_THAT(perf.uncountable(), Not(IsEmpty()));
    }
  }
  EXPECT_EQ(info->modules(0).id(), "builtin");
  EXPECT_EQ(info->limits().max_queue(), 64);
  // PAPI is listed with each of its components, enabled or why not; RAPL only where the host
  // has it (this VM has no /sys/class/powercap).
  const v1::CollectorInfo* papi = nullptr;
  bool rapl = false;
  for (const auto& c : info->devices(0).collectors()) {
    if (c.name() == "papi") papi = &c;
    rapl = rapl || c.name() == "rapl";
  }
  ASSERT_NE(papi, nullptr);
#if KPROF_HAS_PAPI
  EXPECT_TRUE(papi->available()) << papi->reason();
  ASSERT_GT(papi->components_size(), 0);
  EXPECT_EQ(papi->components(0).name(), "perf_event");
  for (const auto& component : papi->components()) {
    EXPECT_EQ(component.enabled(), component.reason().empty()) << component.name();
  }
#else
  EXPECT_FALSE(papi->available());
  EXPECT_THAT(papi->reason(), HasSubstr("built without PAPI"));
#endif
  EXPECT_EQ(rapl, core::HasRaplZones());
  // CUDA: the devices, or why there are none (this VM has no driver).
  const auto cuda = core::CudaDevices();
  if (cuda.ok()) {
    EXPECT_THAT(info->cuda(), HasSubstr("cuda:0"));
  } else {
    EXPECT_EQ(info->cuda(), "no CUDA devices: " + std::string(cuda.status().message()));
  }
}

// The host is described by a worker started for it, which is gone by the time calls are
// served: the daemon itself never loads PAPI (nor libpfm's tables), the CUDA driver or NVML.
TEST_F(ServiceTest, TheDaemonLoadsNoMeasurementLibraries) {
  ASSERT_THAT(client_->Info(), IsOk());
  for (const char* library : {"libpapi", "libpfm", "libcuda", "libnvidia-ml"}) {
    EXPECT_THAT(::kprof::testing::MappedFiles(daemon_.pid(), library), IsEmpty()) << library;
  }
  EXPECT_THAT(::kprof::testing::ChildProcesses(daemon_.pid()), IsEmpty());
}

// A worker that cannot describe the host leaves the daemon serving, saying what it lacks.
TEST_F(ServiceTest, AWorkerThatCannotDescribeTheHostIsNamedInInfo) {
  Daemon broken;
  ASSERT_TRUE(broken.Start(cache_.path() + "/broken", {"--worker", "/bin/false"}));
  auto client = client::Client::Connect(broken.target());
  ASSERT_THAT(client, IsOk());
  auto info = (*client)->Info();
  ASSERT_THAT(info, IsOk());
  ASSERT_EQ(info->devices_size(), 1);
  const v1::DeviceInfo& cpu = info->devices(0);
  EXPECT_EQ(cpu.device(), "cpu:0");
  EXPECT_GE(cpu.cpus(), 1);
  // rusage needs nothing from the host; perf and PAPI say why they are unknown.
  ASSERT_EQ(cpu.collectors_size(), 3);
  EXPECT_EQ(cpu.collectors(0).name(), "rusage");
  EXPECT_TRUE(cpu.collectors(0).available());
  EXPECT_EQ(cpu.collectors(0).metrics_size(), 6);
  for (int i = 1; i < 3; ++i) {
    const auto& collector = cpu.collectors(i);
    EXPECT_FALSE(collector.available()) << collector.name();
    EXPECT_THAT(collector.reason(),
                HasSubstr("kprofd could not describe this host: the worker describing the CPU: "
                          "worker exited with status 1"));
  }
  EXPECT_THAT(info->cuda(), HasSubstr("no CUDA devices: the worker describing the GPUs: worker "
                                      "exited with status 1"));
}

TEST_F(ServiceTest, ADescribeTimeoutMustBePositive) {
  Daemon daemon;
  const std::string log = cache_.path() + "/stderr";
  daemon.set_stderr(log);
  EXPECT_FALSE(daemon.Start(cache_.path() + "/zero", {"--describe-timeout", "0s"}));
  EXPECT_TRUE(WIFEXITED(daemon.exit_status()));
  EXPECT_EQ(WEXITSTATUS(daemon.exit_status()), 1);
  EXPECT_THAT(ReadFileBytes(log), HasSubstr("--describe-timeout wants a positive duration"));
}

#if KPROF_HAS_PAPI
TEST_F(ServiceTest, PapiCountsThroughTheDaemonAndRefusesWhatItCannotCount) {
  KPROF_SKIP_UNDER_EMULATION("has no perf_event_open, which PAPI counts through");
  v1::ProfileFunctionRequest request;
  request.mutable_call()->set_module_id("builtin");
  request.mutable_call()->set_function("spin_us");
  request.mutable_call()->add_args("float64:500");
  request.set_number(4);
  auto* papi = request.add_collectors();
  papi->set_name("papi");
  papi->add_options("perf::TASK-CLOCK");
  auto r = client_->ProfileFunction(request);
  if (!r.ok() && absl::StrContains(r.status().message(), "component perf_event disabled")) {
    // libpfm4 knows no PMU of this CPU, and PAPI then counts no perf event at all, software
    // ones too: the refusal names the event and PAPI's reason, and the worker lives on.
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition,
                            HasSubstr("PAPI event 'perf::TASK-CLOCK' cannot be counted on this "
                                      "host")));
    request.clear_collectors();
    EXPECT_THAT(client_->ProfileFunction(request), IsOk());
    GTEST_SKIP() << "PAPI's perf_event component is disabled here: " << r.status();
  }
  ASSERT_THAT(r, IsOk());
  auto report = wire::FromProto(r->report());
  ASSERT_THAT(report, IsOk());
  // 4 spins of 500 us: at least most of 2 ms of CPU, in ns.
  EXPECT_GE(std::get<report::Count>(report->calls[0].at("perf::TASK-CLOCK")).value, 1'000'000);

  papi->clear_options();
  papi->add_options("NO_SUCH_EVENT");
  EXPECT_THAT(client_->ProfileFunction(request),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("PAPI event 'NO_SUCH_EVENT' cannot be counted")));
  // The worker survives a refused collector: the next job runs.
  papi->clear_options();
  papi->add_options("perf::TASK-CLOCK");
  EXPECT_THAT(client_->ProfileFunction(request), IsOk());
}
#endif

// A program knows a missing module by a structured detail, not by the message's words: a
// google.rpc.Status (RichStatus) in the call's error details naming it, which any gRPC tool reads.
TEST_F(ServiceTest, AMissingModuleIsADetailOfTheRichStatus) {
  const std::string id(64, 'c');
  auto stub = v1::Profiler::NewStub(
      grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::TimeEvaluateResponse response;
  const grpc::Status status =
      stub->TimeEvaluate(&context, Time(id, "vadd", {"float32[8]"}), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  v1::RichStatus rich;
  ASSERT_TRUE(rich.ParseFromString(status.error_details()));
  EXPECT_EQ(rich.code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(rich.message(), status.error_message());
  ASSERT_EQ(rich.details_size(), 1);
  v1::MissingModule missing;
  ASSERT_TRUE(rich.details(0).UnpackTo(&missing));
  EXPECT_EQ(missing.module_id(), id);
  // Through the client library, the detail is a payload of the status.
  const auto timed = client_->TimeEvaluate(Time(id, "vadd", {"float32[8]"}));
  EXPECT_EQ(wire::MissingModule(timed.status()), id);
  // Other errors carry no details.
  grpc::ClientContext other;
  const grpc::Status no_function =
      stub->TimeEvaluate(&other, Time("builtin", "no_such_function", {}), &response);
  EXPECT_EQ(no_function.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(no_function.error_details(), "");
}

TEST(ReportConversion, ProtoRoundTripIsTheIdentity) {
  report::Report report;
  report.calls.push_back({{"Name", std::string("a \"q\"")},
                          {"Duration (us)", report::Duration{1.5}},
                          {"Count", report::Count{-3}},
                          {"Percent", report::Percent{12.5}},
                          {"Ratio", report::Ratio{0.25}}});
  report.device_metrics["cpu0"] = {{"Duration (us)", report::Duration{3}}};
  report.configuration = {{"Number of threads", report::Count{2}}};
  auto back = wire::FromProto(wire::ToProto(report));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, report);

  v1::Report empty_metric;
  (*empty_metric.add_calls()->mutable_metrics())["X"];
  EXPECT_THAT(wire::FromProto(empty_metric), StatusIs(absl::StatusCode::kInvalidArgument,
                                                      HasSubstr("calls[0].\"X\" has no value")));
}

TEST_F(ServiceTest, EachBadRequestGetsItsCode) {
  auto module = client_->LoadModuleFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT(client_->TimeEvaluate(Time(std::string(64, 'f'), "f", {})),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown module ffff")));
  EXPECT_THAT(
      client_->TimeEvaluate(Time(module->id(), "vsub", {})),
      StatusIs(absl::StatusCode::kNotFound, "module holds no function 'vsub' (it exports: vadd)"));
  EXPECT_THAT(client_->TimeEvaluate(Time("builtin", "gemm", {})),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no function 'gemm'")));
  EXPECT_THAT(client_->TimeEvaluate(Time(module->id(), "vad", {})),
              StatusIs(absl::StatusCode::kNotFound,
                       "module holds no function 'vad' (did you mean 'vadd'? it exports: vadd)"));
  // A C++ kernel without extern "C": the call is told why it is not found by its name.
  auto mangled = client_->LoadModuleFile(TestModulePath("mangled"));
  ASSERT_THAT(mangled, IsOk());
  EXPECT_THAT(client_->TimeEvaluate(Time(mangled->id(), "my_saxpy", {})),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("module holds no function 'my_saxpy', but the C++ function "
                                 "'_Z8my_saxpyP8DLTensori': declare it extern \"C\"")));
  v1::TimeEvaluateRequest cpu1 = Time("builtin", "spin_us", {"float64:1"});
  cpu1.set_device("cpu:1");
  EXPECT_THAT(client_->TimeEvaluate(cpu1),
              StatusIs(absl::StatusCode::kNotFound, "unknown device cpu:1 (devices here: cpu:0)"));
  v1::TimeEvaluateRequest cuda = Time("builtin", "spin_us", {"float64:1"});
  cuda.set_device("cuda:0");
  // Without a GPU the answer says why: no driver, no device, or a build without CUDA.
  const auto cuda_devices = core::CudaDevices();
  EXPECT_THAT(
      client_->TimeEvaluate(cuda),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr(cuda_devices.ok() ? std::string("not supported yet")
                                           : std::string(cuda_devices.status().message()))));
  v1::TimeEvaluateRequest gpu = Time("builtin", "spin_us", {"float64:1"});
  gpu.set_device("gpu");
  EXPECT_THAT(client_->TimeEvaluate(gpu), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(client_->TimeEvaluate(Time("builtin", "spin_us", {"float64[x]"})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("column 9")));
  EXPECT_THAT(client_->TimeEvaluate(Time("builtin", "spin_us", {"float64:1", "float64:2"})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes one float64")));
  EXPECT_THAT(client_->TimeEvaluate(Time(module->id(), "vadd", {"float32[4]"})),
              StatusIs(absl::StatusCode::kAborted, "function 'vadd' returned 1"));
  v1::ProfileFunctionRequest papi;
  papi.mutable_call()->set_module_id("builtin");
  papi.mutable_call()->set_function("spin_us");
  papi.mutable_call()->add_args("float64:1");
  papi.add_collectors()->set_name("likwid");
  EXPECT_THAT(client_->ProfileFunction(papi),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown collector 'likwid'")));
  // A collector this host lacks says so once, naming itself.
  papi.mutable_collectors(0)->set_name("nvml");
  const auto nvml = client_->ProfileFunction(papi);
  if (!nvml.ok()) {
    EXPECT_THAT(nvml, StatusIs(absl::StatusCode::kFailedPrecondition,
                               ::testing::StartsWith("collector 'nvml': libnvidia-ml.so.1")));
  }
  v1::TimeEvaluateRequest cooldown = Time("builtin", "spin_us", {"float64:1"});
  cooldown.set_repeats_to_cooldown(0);
  EXPECT_THAT(client_->TimeEvaluate(cooldown),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeats_to_cooldown = 0")));
  EXPECT_THAT(client_->UnloadModule(std::string(64, '0')), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(client_->UnloadModule("builtin"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(client_->UnloadModule(module->id()), IsOk());
  EXPECT_THAT(client_->HasModule(module->id()), IsOkAndHolds(false));
}

TEST_F(ServiceTest, ACrashKillsOnlyTheWorkerAndTheNextJobRuns) {
  auto module = client_->LoadModuleFile(TestModulePath("faults"));
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT(client_->TimeEvaluate(Time(module->id(), "segfault", {})),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("function 'segfault' crashed: worker killed by SIGSEGV")));
  EXPECT_THAT(client_->TimeEvaluate(Time(module->id(), "aborts", {})),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("SIGABRT")));
  EXPECT_THAT(client_->TimeEvaluate(Time("builtin", "spin_us", {"float64:10"})), IsOk());
  auto info = client_->Info();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->devices(0).jobs_failed(), 2);
  EXPECT_EQ(info->devices(0).jobs_completed(), 1);
}

TEST_F(ServiceTest, SigtermStopsTheDaemonCleanly) {
  ASSERT_THAT(client_->TimeEvaluate(Time("builtin", "spin_us", {"float64:10"})), IsOk());
  const int status = daemon_.Stop();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace kprof

// kprofd end to end: a real daemon on 127.0.0.1:0, real worker processes, the client library.
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
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

class ServiceTest : public ::testing::Test {
 protected:
  void StartDaemon(const std::vector<std::string>& extra = {}) {
    ASSERT_TRUE(daemon_.Start(cache_.path() + "/cache", extra))
        << "kprofd did not start, status " << daemon_.exit_status();
    client::ClientOptions options;
    options.chunk_bytes = 4096;  // several chunks even for small test modules
    options.timeout = absl::Seconds(30);
    auto connected = client::Client::Connect(daemon_.target(), options);
    ASSERT_THAT(connected, IsOk());
    client_ = std::move(*connected);
  }
  void SetUp() override { StartDaemon(); }

  static v1::TimeEvaluateRequest Time(const std::string& module, const std::string& function,
                                      std::vector<std::string> args) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(module);
    request.mutable_call()->set_function(function);
    for (auto& a : args) request.mutable_call()->add_args(a);
    return request;
  }

  TempDir cache_;
  Daemon daemon_;
  std::unique_ptr<client::Client> client_;
};

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
    EXPECT_TRUE(info->devices(0).collectors(1).available())
        << info->devices(0).collectors(1).reason();
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
  EXPECT_GE(std::get<core::Count>(report->calls[0].at("perf::TASK-CLOCK")).value, 1'000'000);

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

TEST_F(ServiceTest, UploadsInChunksAndStoresBytesOnce) {
  const std::string bytes = ReadFileBytes(TestModulePath("vector_add"));
  ASSERT_GT(bytes.size(), 4096u * 3);
  const std::string id = client::ModuleId(bytes);
  EXPECT_THAT(client_->HasModule(id), IsOkAndHolds(false));
  auto module = client_->LoadModule(bytes, "vector_add.so");
  ASSERT_THAT(module, IsOk());
  EXPECT_EQ(module->id(), id);
  EXPECT_THAT(module->functions(), ElementsAre("vadd"));
  EXPECT_EQ(module->size_bytes(), bytes.size());
  EXPECT_THAT(client_->HasModule(id), IsOkAndHolds(true));

  // The same bytes again, through the raw stub so that the upload really happens.
  auto stub = v1::Profiler::NewStub(
      grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::LoadModuleResponse response;
  auto writer = stub->LoadModule(&context, &response);
  v1::LoadModuleRequest header;
  header.mutable_header()->set_name("again.so");
  header.mutable_header()->set_size_bytes(bytes.size());
  header.mutable_header()->set_sha256(id);
  ASSERT_TRUE(writer->Write(header));
  v1::LoadModuleRequest chunk;
  chunk.set_chunk(bytes);
  ASSERT_TRUE(writer->Write(chunk));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_TRUE(response.already_held());

  auto modules = client_->ListModules();
  ASSERT_THAT(modules, IsOk());
  EXPECT_THAT(*modules, SizeIs(2));  // builtin and vector_add, once
}

// The daemon keeps the files of the modules jobs use open (a job's worker gets a duplicate), at
// most 128 of them: over 150 modules with one entry point, used round and round, every job
// runs its own module's code, and the daemon's descriptors stay bounded.
TEST_F(ServiceTest, ModuleFilesKeptOpenForJobsStayBoundedAndEachJobRunsItsOwn) {
  constexpr int kModules = 150;
  std::vector<std::string> families;
  for (int k = 1; k <= 6; ++k) {
    families.push_back(ReadFileBytes(TestModulePath("candidate_" + std::to_string(k))));
  }
  const auto open_descriptors = [this] {
    std::error_code error;
    const std::filesystem::directory_iterator fds("/proc/" + std::to_string(daemon_.pid()) + "/fd",
                                                  error);
    return std::distance(fds, std::filesystem::directory_iterator());
  };
  const long before = open_descriptors();
  std::vector<std::string> ids;
  for (int i = 0; i < kModules; ++i) {
    // Distinct bytes (the loader ignores what follows the file's last section), K = i % 6 + 1.
    auto loaded = client_->LoadModule(families[i % 6] + absl::StrCat("-kept-", i), "cand.so");
    ASSERT_THAT(loaded, IsOk());
    ids.push_back(loaded->id());
  }
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kModules; ++i) {
      auto request = Time(ids[static_cast<size_t>(i)], "candidate", {});
      request.set_number(1);
      request.set_repeat(1);
      EXPECT_THAT(
          client_->TimeEvaluate(request),
          StatusIs(absl::StatusCode::kAborted, HasSubstr(absl::StrCat("returned ", i % 6 + 1))))
          << "module " << i << ", round " << round;
    }
    EXPECT_LE(open_descriptors(), before + 128 + 16) << "round " << round;
  }
}

// The client keeps the bytes of what it uploaded (a large module's in pages mapped at once) and
// uploads them again when the daemon no longer has the module: here its file was removed
// behind the daemon, which drops it; the job then runs the module's own code.
TEST_F(ServiceTest, ALargeModuleIsUploadedAgainFromTheBytesTheClientKept) {
  std::string bytes = ReadFileBytes(TestModulePath("candidate_4"));
  bytes.resize(5 << 20, '\0');  // past the size whose copy is made beside the hash
  std::string id;
  {
    const std::string passed = bytes;  // the client's copy is its own, not this string
    auto loaded = client_->LoadModule(passed, "big.so");
    ASSERT_THAT(loaded, IsOk());
    id = loaded->id();
  }
  ASSERT_EQ(std::remove((cache_.path() + "/cache/modules/" + id).c_str()), 0);
  auto request = Time(id, "candidate", {});
  request.set_number(1);
  request.set_repeat(1);
  EXPECT_THAT(client_->TimeEvaluate(request),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("returned 4")));
  EXPECT_EQ(ReadFileBytes(cache_.path() + "/cache/modules/" + id), bytes);
}

// ListModules answers in pages (by count, and by the bytes of the functions' names), in
// order of id with the builtin module first; the client library pages through them all.
TEST_F(ServiceTest, ModulesAreListedInPages) {
  std::set<std::string> held = {"builtin"};
  for (int k = 1; k <= 5; ++k) {
    auto loaded = client_->LoadModuleFile(TestModulePath("candidate_" + std::to_string(k)));
    ASSERT_THAT(loaded, IsOk());
    held.insert(loaded->id());
  }
  auto stub = v1::Profiler::NewStub(
      grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials()));
  v1::ListModulesRequest request;
  request.set_page_size(2);
  std::vector<std::string> listed;
  int pages = 0;
  do {
    grpc::ClientContext context;
    v1::ListModulesResponse response;
    ASSERT_TRUE(stub->ListModules(&context, request, &response).ok());
    EXPECT_LE(response.modules_size(), 2);
    for (const auto& m : response.modules()) listed.push_back(m.id());
    request.set_page_token(response.next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(listed.size(), 6u);
  EXPECT_EQ(listed[0], "builtin");
  EXPECT_TRUE(std::is_sorted(listed.begin() + 1, listed.end()));
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), held);
  // A page of one: the builtin module, then the rest from the next page on.
  request.set_page_size(1);
  request.clear_page_token();
  grpc::ClientContext one_context;
  v1::ListModulesResponse one;
  ASSERT_TRUE(stub->ListModules(&one_context, request, &one).ok());
  ASSERT_EQ(one.modules_size(), 1);
  EXPECT_EQ(one.modules(0).id(), "builtin");
  request.set_page_token(one.next_page_token());
  request.set_page_size(0);
  grpc::ClientContext rest_context;
  v1::ListModulesResponse rest;
  ASSERT_TRUE(stub->ListModules(&rest_context, request, &rest).ok());
  EXPECT_EQ(rest.modules_size(), 5);
  EXPECT_TRUE(rest.next_page_token().empty());
  // The library gathers every page; GetInfo has the first, and says there is no more.
  auto all = client_->ListModules();
  ASSERT_THAT(all, IsOk());
  EXPECT_EQ(all->size(), 6u);
  auto info = client_->Info();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->modules_size(), 6);
  EXPECT_FALSE(info->more_modules());
  // Bad pages are refused, saying what is accepted.
  for (const auto& [size, token, expected] :
       {std::tuple{-1, std::string(), "page_size = -1 (accepted: 1 to 1000, or 0 for 1000)"},
        std::tuple{0, std::string("xyz"), "page_token is not one a ListModules answer gave"}}) {
    grpc::ClientContext context;
    v1::ListModulesRequest bad;
    bad.set_page_size(size);
    bad.set_page_token(token);
    v1::ListModulesResponse response;
    const grpc::Status status = stub->ListModules(&context, bad, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr(expected));
  }
}

// Uploads through the raw stub with a header of the test's choosing.
absl::Status RawUpload(const std::string& target, const v1::ModuleHeader& header,
                       const std::string& bytes) {
  auto stub =
      v1::Profiler::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::LoadModuleResponse response;
  auto writer = stub->LoadModule(&context, &response);
  v1::LoadModuleRequest first;
  *first.mutable_header() = header;
  if (!header.name().empty() || header.size_bytes() > 0) writer->Write(first);
  v1::LoadModuleRequest chunk;
  chunk.set_chunk(bytes);
  writer->Write(chunk);
  writer->WritesDone();
  return client::FromGrpcStatus(writer->Finish());
}

TEST_F(ServiceTest, UploadErrorsHaveTheirCodes) {
  const std::string bytes = ReadFileBytes(TestModulePath("vector_add"));
  v1::ModuleHeader header;
  header.set_name("m.so");
  header.set_size_bytes(bytes.size());
  header.set_sha256(client::ModuleId(bytes));

  v1::ModuleHeader wrong_size = header;
  wrong_size.set_size_bytes(bytes.size() + 10);
  EXPECT_THAT(RawUpload(daemon_.target(), wrong_size, bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("declared size")));
  v1::ModuleHeader short_size = header;
  short_size.set_size_bytes(10);
  EXPECT_THAT(RawUpload(daemon_.target(), short_size, bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("longer than its declared")));
  v1::ModuleHeader wrong_hash = header;
  wrong_hash.set_sha256(std::string(64, 'a'));
  EXPECT_THAT(RawUpload(daemon_.target(), wrong_hash, bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("SHA-256 is")));
  v1::ModuleHeader bad_hash_text = header;
  bad_hash_text.set_sha256("XYZ");
  EXPECT_THAT(RawUpload(daemon_.target(), bad_hash_text, bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lowercase hex")));
  v1::ModuleHeader cubin = header;
  cubin.set_format("cubin");
  EXPECT_THAT(RawUpload(daemon_.target(), cubin, bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("declared cubin, but the bytes are not CUDA code")));
  v1::ModuleHeader unknown = header;
  unknown.set_format("wasm");
  EXPECT_THAT(RawUpload(daemon_.target(), unknown, bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'wasm' is unknown (accepted: auto, shared-library, cubin, "
                                 "fatbin, ptx)")));
  EXPECT_THAT(RawUpload(daemon_.target(), v1::ModuleHeader(), bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("starts with its header")));
  EXPECT_THAT(client_->LoadModule("this is not a module", "text.so"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an ELF file")));
  // Names go into the protocol's strings and onto terminals: printable UTF-8 only.
  for (const std::string& name : {std::string("m\x1b[31m.so"), std::string("two\nlines.so")}) {
    v1::ModuleHeader control = header;
    control.set_name(name);
    EXPECT_THAT(RawUpload(daemon_.target(), control, bytes),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not printable UTF-8")))
        << name;
  }
  std::string bad_export = bytes;
  for (size_t at = bad_export.find(std::string("vadd\0", 5)); at != std::string::npos;
       at = bad_export.find(std::string("vadd\0", 5), at + 1)) {
    bad_export[at + 1] = '\xff';
  }
  EXPECT_THAT(client_->LoadModule(bad_export, "bad.so"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("exports the name 'v\\xffdd', which is not printable UTF-8")));
  // Nothing of them was kept: the daemon lists its modules as before.
  EXPECT_THAT(client_->ListModules(), IsOk());
}

// Durations given in milliseconds must be finite and at most an hour: NaN and 1e308 would run
// until the job timeout.
TEST_F(ServiceTest, NonFiniteOrHugeMillisecondsAreRefused) {
  for (const double ms : {std::nan(""), std::numeric_limits<double>::infinity(), 1e308, -1.0}) {
    for (const bool cooldown : {false, true}) {
      v1::TimeEvaluateRequest r;
      r.mutable_call()->set_module_id("builtin");
      r.mutable_call()->set_function("nop");
      if (cooldown) {
        r.set_cooldown_interval_ms(ms);
      } else {
        r.set_min_repeat_ms(ms);
      }
      EXPECT_THAT(
          client_->TimeEvaluate(r),
          StatusIs(absl::StatusCode::kInvalidArgument,
                   AllOf(HasSubstr(cooldown ? "cooldown_interval_ms = " : "min_repeat_ms = "),
                         HasSubstr("is out of range (accepted: 0 to 3600000)"))))
          << ms;
    }
  }
}

#ifdef KPROF_TEST_CUDA_IMAGES
// CUDA code is stored like any module, its kernels read from the bytes (a fatbin's once a
// device loads it), kept across restarts, and refused on the CPU. (Running it: cuda_test.)
TEST_F(ServiceTest, CudaModulesAreStoredWithTheirKernels) {
  const std::string dir = kprof::testing::TestModuleDir();
  std::map<std::string, std::string> ids;
  for (const char* kind : {"cubin", "fatbin", "ptx"}) {
    auto module = client_->LoadModuleFile(dir + "/vector_add_cuda." + kind);
    ASSERT_THAT(module, IsOk()) << kind;
    EXPECT_EQ(module->format(), kind);
    if (std::string(kind) == "fatbin") {
      EXPECT_THAT(module->functions(), SizeIs(0));
    } else {
      EXPECT_THAT(module->functions(), ElementsAre("fault", "spin_ns", "vadd")) << kind;
    }
    ids[kind] = module->id();
  }
  // Declared formats must match the bytes.
  EXPECT_THAT(client_->LoadModuleFile(dir + "/vector_add_cuda.ptx", "cubin"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("declared cubin, but the bytes are ptx")));
  // Not on the CPU.
  EXPECT_THAT(client_->TimeEvaluate(Time(ids["cubin"], "vadd", {})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is cubin code for a CUDA device; the job is for cpu:0")));
  // The cache re-reads the formats at start.
  daemon_.Stop();
  StartDaemon();
  auto modules = client_->ListModules();
  ASSERT_THAT(modules, IsOk());
  std::map<std::string, std::string> formats;
  for (const auto& m : *modules) formats[m.id()] = m.format();
  EXPECT_EQ(formats[ids["cubin"]], "cubin");
  EXPECT_EQ(formats[ids["fatbin"]], "fatbin");
  EXPECT_EQ(formats[ids["ptx"]], "ptx");
}
#endif

TEST_F(ServiceTest, OversizedModuleIsResourceExhausted) {
  daemon_.Stop();
  StartDaemon({"--max-module-bytes", "1000"});
  EXPECT_THAT(client_->LoadModuleFile(TestModulePath("vector_add")),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("over the limit of 1000")));
}

TEST_F(ServiceTest, ModulesSurviveARestart) {
  auto module = client_->LoadModuleFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  ASSERT_EQ(daemon_.Stop(), 0);
  StartDaemon();
  auto has = client_->HasModule(module->id());
  ASSERT_THAT(has, IsOk());
  EXPECT_TRUE(*has);
  auto modules = client_->ListModules();
  ASSERT_THAT(modules, IsOk());
  EXPECT_EQ((*modules)[1].name(), "vector_add.so");
  auto timed = client_->TimeEvaluate(
      Time(module->id(), "vadd", {"float32[8]:ones", "float32[8]:ones", "float32[8]"}));
  EXPECT_THAT(timed, IsOk());
}

// Names and formats are kept in the cache's journal, a line per change: a line cut short by a
// crash is passed over and the lines before it still count; each start writes the journal anew
// with one line per module.
TEST_F(ServiceTest, TheCacheJournalSurvivesALineCutShortAndIsWrittenAnewAtStart) {
  auto first = client_->LoadModuleFile(TestModulePath("vector_add"));
  ASSERT_THAT(first, IsOk());
  auto second = client_->LoadModule(ReadFileBytes(TestModulePath("many_exports")), "second.so");
  ASSERT_THAT(second, IsOk());
  ASSERT_THAT(client_->LoadModule(ReadFileBytes(TestModulePath("vector_add")), "again.so"), IsOk());
  ASSERT_EQ(daemon_.Stop(), 0);
  const std::string journal = cache_.path() + "/cache/modules/journal";
  const auto lines = [&] {
    std::vector<std::string> found;
    std::ifstream in(journal);
    for (std::string line; std::getline(in, line);) found.push_back(line);
    return found;
  };
  EXPECT_EQ(lines().size(), 2u) << "one line per module stored (the same bytes again add none)";
  // As a crash mid-append would leave it: a new name for the first module, cut short.
  std::ofstream(journal, std::ios::app) << R"({"id":")" << first->id() << R"(","name":"renam)";
  StartDaemon();
  auto modules = client_->ListModules();
  ASSERT_THAT(modules, IsOk());
  std::map<std::string, std::string> names;
  for (const v1::ModuleInfo& m : *modules) names[m.id()] = m.name();
  EXPECT_EQ(names[first->id()], "vector_add.so");
  EXPECT_EQ(names[second->id()], "second.so");
  const std::vector<std::string> rewritten = lines();
  EXPECT_EQ(rewritten.size(), 2u);
  for (const std::string& line : rewritten) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  }
  EXPECT_THAT(client_->TimeEvaluate(
                  Time(first->id(), "vadd", {"float32[8]:ones", "float32[8]:ones", "float32[8]"})),
              IsOk());
}

// A daemon that stores and drops modules for a long time keeps its journal small: once it
// grows past 64 KiB and four times what it holds, it is written anew, and nothing recorded is
// lost to that, the module whose line set it off included.
TEST_F(ServiceTest, TheCacheJournalIsWrittenAnewAsItGrows) {
  const std::string bytes = ReadFileBytes(TestModulePath("many_exports"));
  const std::string journal = cache_.path() + "/cache/modules/journal";
  size_t largest = 0, previous = 0;
  int rewritten = 0;
  std::map<std::string, std::string> kept;  // id -> name
  // Each a line of some 170 bytes: 85 KB in all. Every fifth module is kept, each of its own
  // bytes (trailing bytes after the ELF image).
  for (int i = 0; i < 500; ++i) {
    const std::string name = absl::StrCat("cycle-", i, ".so");
    auto loaded = client_->LoadModule(bytes + absl::StrCat("-", i), name);
    ASSERT_THAT(loaded, IsOk());
    const auto size = static_cast<size_t>(std::filesystem::file_size(journal));
    if (size < previous) {
      ++rewritten;
      kept.emplace(loaded->id(), name);  // the module whose line set the rewrite off
    } else if (i % 5 == 0) {
      kept.emplace(loaded->id(), name);
    } else {
      ASSERT_THAT(client_->UnloadModule(loaded->id()), IsOk());
    }
    largest = std::max(largest, size);
    previous = static_cast<size_t>(std::filesystem::file_size(journal));
  }
  EXPECT_GE(rewritten, 1);
  EXPECT_LE(largest, 70u << 10);
  ASSERT_EQ(daemon_.Stop(), 0);
  StartDaemon();
  auto modules = client_->ListModules();
  ASSERT_THAT(modules, IsOk());
  std::map<std::string, std::string> listed;
  for (const v1::ModuleInfo& m : *modules) {
    if (m.id() != "builtin") listed.emplace(m.id(), m.name());
  }
  EXPECT_EQ(listed, kept);
}

TEST_F(ServiceTest, SecondDaemonOnTheSameCacheIsRefused) {
  Daemon second;
  EXPECT_FALSE(second.Start(cache_.path() + "/cache"));
  EXPECT_TRUE(WIFEXITED(second.exit_status()));
  EXPECT_NE(WEXITSTATUS(second.exit_status()), 0);
}

TEST_F(ServiceTest, EvictedModulesAreUploadedAgainByTheClient) {
  daemon_.Stop();
  const std::string first = ReadFileBytes(TestModulePath("vector_add"));
  const std::string second = ReadFileBytes(TestModulePath("many_exports"));
  StartDaemon({"--max-cache-bytes", std::to_string(first.size() + second.size() - 1)});
  auto a = client_->LoadModule(first, "vector_add.so");
  ASSERT_THAT(a, IsOk());
  auto b = client_->LoadModule(second, "many_exports.so");
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT(client_->HasModule(a->id()), IsOkAndHolds(false));  // evicted: LRU
  // The job names the evicted module; the client uploads it again and retries.
  auto timed = client_->TimeEvaluate(
      Time(a->id(), "vadd", {"float32[8]:ones", "float32[8]:ones", "float32[8]"}));
  ASSERT_THAT(timed, IsOk());
  EXPECT_THAT(client_->HasModule(a->id()), IsOkAndHolds(true));
}

// Options are checked by the front before a job is queued, with the worker's own function: a
// bad request is refused at once, even while the device is busy, and no worker runs it.
TEST_F(ServiceTest, BadOptionsAreRefusedBeforeTheJobIsQueued) {
  const auto device_counts = [this] {
    auto info = client_->Info();
    EXPECT_THAT(info, IsOk());
    const v1::DeviceInfo& cpu = info->devices(0);
    return std::tuple{cpu.jobs_completed(), cpu.jobs_failed(), cpu.workers_started()};
  };
  // A job that holds the device for two seconds.
  auto busy = std::async(std::launch::async, [this] {
    v1::TimeEvaluateRequest request = Time("builtin", "spin_us", {"float64:2000000"});
    request.set_number(1);
    request.set_repeat(1);
    return client_->TimeEvaluate(request);
  });
  absl::SleepFor(absl::Milliseconds(200));  // let it start
  const auto before = device_counts();

  std::vector<std::pair<v1::TimeEvaluateRequest, std::string>> times;
  const auto spin = [] { return Time("builtin", "spin_us", {"float64:1"}); };
  times.emplace_back(spin(), "repeat = 0 is out of range");
  times.back().first.set_repeat(0);
  times.emplace_back(spin(), "min_repeat_ms = -1 is out of range");
  times.back().first.set_min_repeat_ms(-1);
  times.emplace_back(spin(), "min_repeats and max_time_ms apply only with max_relative_stddev");
  times.back().first.set_min_repeats(3);
  times.emplace_back(spin(), "unknown outlier filter 'tukey'");
  times.back().first.set_outlier_filter("tukey");
  times.emplace_back(spin(), "unknown pre-processing step 'flush'");
  times.back().first.set_preprocess("flush");
  times.emplace_back(spin(), "flush_l2 sizes the cache flush to a CUDA device's L2");
  times.back().first.set_flush_l2(true);
  times.emplace_back(Time("builtin", "spin_us", {"float33:1"}), "float33");
  times.emplace_back(spin(), "launch.grid has 4 dimensions");
  for (int i = 0; i < 4; ++i) times.back().first.mutable_call()->mutable_launch()->add_grid(1);
  times.back().first.mutable_call()->mutable_launch()->add_block(1);
  for (const auto& [request, message] : times) {
    EXPECT_THAT(client_->TimeEvaluate(request),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)))
        << message;
  }
  v1::ProfileFunctionRequest profile;
  profile.mutable_call()->set_module_id("builtin");
  profile.mutable_call()->set_function("spin_us");
  profile.mutable_call()->add_args("float64:1");
  profile.set_number(0);
  EXPECT_THAT(client_->ProfileFunction(profile),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("number = 0")));
  v1::ProfileRequest sequence;
  *sequence.add_calls() = profile.call();
  sequence.set_repeat(0);
  EXPECT_THAT(client_->Profile(sequence),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeat = 0")));

  // All answered while the long job still held the device, and none ran or failed in a worker.
  EXPECT_EQ(busy.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(device_counts(), before);
  EXPECT_THAT(busy.get(), IsOk());
}

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

// An autotuner uploads thousands of candidates: the client remembers only so many bytes for
// re-uploads, forgetting the oldest, and then says plainly that the daemon lacks the module.
TEST_F(ServiceTest, TheClientRemembersOnlyTheNewestModulesForReupload) {
  daemon_.Stop();
  const std::string first = ReadFileBytes(TestModulePath("vector_add"));
  const std::string second = ReadFileBytes(TestModulePath("many_exports"));
  StartDaemon({"--max-cache-bytes", std::to_string(first.size() + second.size() - 1)});
  client::ClientOptions options;
  options.max_remembered_bytes = second.size();  // room for one of them
  auto client = client::Client::Connect(daemon_.target(), options);
  ASSERT_THAT(client, IsOk());
  auto a = (*client)->LoadModule(first, "vector_add.so");
  ASSERT_THAT(a, IsOk());
  auto b = (*client)->LoadModule(second, "many_exports.so");
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT((*client)->HasModule(a->id()), IsOkAndHolds(false));  // evicted by the daemon
  EXPECT_THAT((*client)->TimeEvaluate(
                  Time(a->id(), "vadd", {"float32[8]:ones", "float32[8]:ones", "float32[8]"})),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(a->id())));
}

TEST_F(ServiceTest, TimeEvaluateABuiltin) {
  v1::TimeEvaluateRequest request = Time("builtin", "spin_us", {"float64:100"});
  request.set_repeat(3);
  request.set_number(5);
  auto r = client_->TimeEvaluate(request);
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->seconds_per_call(), SizeIs(3));
  EXPECT_THAT(r->seconds_per_call(), Each(Ge(100e-6)));
  EXPECT_THAT(r->numbers(), ElementsAre(5, 5, 5));
  EXPECT_EQ(r->final_number(), 5);
  EXPECT_GE(r->statistics().min(), 100e-6);
  EXPECT_GE(r->timing().execution_seconds(), 15 * 100e-6);
  EXPECT_GE(r->timing().queue_wait_seconds(), 0);
  EXPECT_EQ(r->device(), "cpu:0");
  EXPECT_EQ(r->argument_shapes(), "float64[]");
  for (const char* key : {"Host", "Kernel", "CPU model", "CPU governor", "Load average",
                          "Worker CPU affinity", "kprofd version"}) {
    EXPECT_EQ(r->environment().metrics().count(key), 1u) << key;
  }
}

TEST_F(ServiceTest, ASteadySpinConverges) {
  KPROF_SKIP_UNDER_EMULATION("runs code too unevenly for a 5% spread");
  v1::TimeEvaluateRequest request = Time("builtin", "spin_us", {"float64:100"});
  request.set_min_repeat_ms(5);
  request.set_max_relative_stddev(0.05);
  request.set_min_repeats(5);
  request.set_max_time_ms(60'000);
  // On a loaded machine one stalled repeat keeps the plain relative std above 5% for
  // thousands of repeats (a 20x stall alone adds 19% / sqrt(n)); the filter sets it aside.
  request.set_outlier_filter("iqr");
  auto r = client_->TimeEvaluate(request, absl::Seconds(120));
  ASSERT_THAT(r, IsOk());
  ASSERT_TRUE(r->has_converged());
  EXPECT_TRUE(r->converged()) << "relative std " << r->rel_stddev();
  EXPECT_EQ(r->stop_reason(), "converged");
  EXPECT_LE(r->rel_stddev(), 0.05);
  EXPECT_GE(r->seconds_per_call_size(), 5);
  // Of the kept repeats, as a sample standard deviation (n - 1).
  const double kept = r->seconds_per_call_size() - r->outliers_size();
  EXPECT_NEAR(r->rel_stddev(), r->filtered_statistics().cv() * std::sqrt(kept / (kept - 1)), 1e-9);
  EXPECT_GE(r->statistics().median(), 100e-6);
}

TEST_F(ServiceTest, AJitteryFunctionDoesNotConvergeWithinItsBudgetAndSaysSo) {
  auto module = client_->LoadModuleFile(TestModulePath("jitter"));
  ASSERT_THAT(module, IsOk());
  // Uniform 0-2 ms per call: the repeats' relative std is about 58%, never 1%.
  v1::TimeEvaluateRequest request = Time(module->id(), "spin_jitter", {"float64:2000"});
  request.set_max_relative_stddev(0.01);
  request.set_max_time_ms(200);
  auto r = client_->TimeEvaluate(request);
  ASSERT_THAT(r, IsOk());
  ASSERT_TRUE(r->has_converged());
  EXPECT_FALSE(r->converged());
  EXPECT_EQ(r->stop_reason(), "time budget");
  EXPECT_GT(r->rel_stddev(), 0.01);
  EXPECT_GE(r->seconds_per_call_size(), 3);
  // 200 ms of calls lasting 1 ms on average: far fewer than the default 10000 repeats.
  EXPECT_LT(r->seconds_per_call_size(), 1000);
  EXPECT_GE(r->timing().execution_seconds(), 0.2);
  const double n = r->seconds_per_call_size();  // no filter: all repeats, sample std
  EXPECT_NEAR(r->rel_stddev(), r->statistics().cv() * std::sqrt(n / (n - 1)), 1e-9);
  EXPECT_EQ(r->outliers_size(), 0);
}

// The worker pins itself and takes its priority before its first job; the manifest of every
// result says what it ended up with.
TEST_F(ServiceTest, WorkersArePinnedAndPrioritisedAsConfigured) {
  const std::vector<int> allowed = core::AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const std::string cpu = std::to_string(allowed.back());
  struct Case {
    std::string priority, manifest;
  };
  std::vector<Case> cases = {{"nice:5", "SCHED_OTHER, nice 5"}};
  core::Placement fifo;
  fifo.priority = *core::ParsePriority("fifo:1");
  if (core::CheckPlacement(fifo).ok()) {
    cases.push_back({"fifo:1", "SCHED_FIFO, priority 1"});
  } else {
    std::fprintf(stderr, "not testing fifo:1 here: %s\n",
                 core::CheckPlacement(fifo).ToString().c_str());
  }
  for (const Case& c : cases) {
    daemon_.Stop();
    StartDaemon({"--pin-cpus", cpu, "--worker-priority", c.priority});
    v1::TimeEvaluateRequest request = Time("builtin", "spin_us", {"float64:10"});
    auto r = client_->TimeEvaluate(request);
    ASSERT_THAT(r, IsOk());
    const auto& m = r->environment().metrics();
    EXPECT_EQ(m.at("Worker CPU affinity").string(), cpu) << c.priority;
    EXPECT_EQ(m.at("Worker priority").string(), c.manifest);
  }
}

TEST_F(ServiceTest, ConvergenceOptionsOutOfRangeAreInvalidArgument) {
  v1::TimeEvaluateRequest alone = Time("builtin", "spin_us", {"float64:1"});
  alone.set_min_repeats(5);
  EXPECT_THAT(client_->TimeEvaluate(alone),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_relative_stddev")));
  v1::TimeEvaluateRequest budget = Time("builtin", "spin_us", {"float64:1"});
  budget.set_max_time_ms(100);
  EXPECT_THAT(client_->TimeEvaluate(budget),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("only with")));
  v1::TimeEvaluateRequest too_loose = Time("builtin", "spin_us", {"float64:1"});
  too_loose.set_max_relative_stddev(2);
  EXPECT_THAT(client_->TimeEvaluate(too_loose),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_relative_stddev = 2")));
  v1::TimeEvaluateRequest one = Time("builtin", "spin_us", {"float64:1"});
  one.set_max_relative_stddev(0.1);
  one.set_min_repeats(1);
  EXPECT_THAT(client_->TimeEvaluate(one),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_repeats = 1")));
  v1::TimeEvaluateRequest negative = Time("builtin", "spin_us", {"float64:1"});
  negative.set_max_relative_stddev(0.1);
  negative.set_max_time_ms(-5);
  EXPECT_THAT(client_->TimeEvaluate(negative),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_time_ms")));
  v1::TimeEvaluateRequest filter = Time("builtin", "spin_us", {"float64:1"});
  filter.set_outlier_filter("zscore");
  EXPECT_THAT(client_->TimeEvaluate(filter),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("accepted: none, iqr")));
  v1::TimeEvaluateRequest huge = Time("builtin", "spin_us", {"float64:1"});
  huge.set_repeat(int64_t{1} << 40);
  EXPECT_THAT(client_->TimeEvaluate(huge),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeat = ")));
}

TEST_F(ServiceTest, ProfileFunctionWithACollector) {
  KPROF_SKIP_UNDER_EMULATION("has no perf_event_open");
  v1::ProfileFunctionRequest request;
  request.mutable_call()->set_module_id("builtin");
  request.mutable_call()->set_function("spin_us");
  request.mutable_call()->add_args("float64:200");
  request.set_warmup(1);
  request.set_number(4);
  request.add_collectors()->set_name("rusage");
  auto* perf = request.add_collectors();
  perf->set_name("perf");
  perf->add_options("task-clock");
  perf->add_options("page-faults");
  auto r = client_->ProfileFunction(request);
  ASSERT_THAT(r, IsOk());
  auto report = wire::FromProto(r->report());
  ASSERT_THAT(report, IsOk());
  ASSERT_THAT(report->calls, SizeIs(1));
  EXPECT_EQ(report->calls[0].at("Count"), core::MetricValue(core::Count{4}));
  EXPECT_GE(std::get<core::Duration>(report->calls[0].at("Duration (us)")).microseconds, 800);
  EXPECT_EQ(report->calls[0].count("User Time (us)"), 1u);
  // perf's task-clock over 4 spins of 200 us: at least most of 800 us of CPU, in ns.
  EXPECT_GE(std::get<core::Count>(report->calls[0].at("task-clock")).value, 400'000);
  EXPECT_EQ(report->calls[0].count("page-faults"), 1u);
  EXPECT_EQ(report->device_metrics.count("cpu0"), 1u);
  EXPECT_EQ(report->configuration.count("CPU model"), 1u);  // the manifest rides along
  EXPECT_EQ(report->configuration.count("Runnable processes"), 1u);
}

TEST_F(ServiceTest, ProfileASequenceLayerByLayer) {
  auto module = client_->LoadModuleFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  v1::ProfileRequest request;
  auto* matmul = request.add_calls();
  matmul->set_module_id("builtin");
  matmul->set_function("matmul");
  for (const char* a : {"float32[32,32]", "float32[32,32]:random", "float32[32,32]:random"}) {
    matmul->add_args(a);
  }
  auto* vadd = request.add_calls();
  vadd->set_module_id(module->id());
  vadd->set_function("vadd");
  for (const char* a : {"float32[64]:ones", "float32[64]:random", "float32[64]"}) vadd->add_args(a);
  request.set_repeat(3);
  request.add_collectors()->set_name("rusage");
  auto r = client_->Profile(request);
  ASSERT_THAT(r, IsOk());
  auto report = wire::FromProto(r->report());
  ASSERT_THAT(report, IsOk());
  EXPECT_THAT(report->calls, SizeIs(6));  // 2 calls x 3 repeats
  double percent = 0;
  for (const auto& call : report->calls)
    percent += std::get<core::Percent>(call.at("Percent")).percent;
  EXPECT_GT(percent, 0);
  EXPECT_LE(percent, 100.0 + 1e-9);
  EXPECT_EQ(report->configuration.at("Repeats"), core::MetricValue(core::Count{3}));
  const std::string table = core::AsTable(*report);
  EXPECT_THAT(table, HasSubstr("matmul"));
  EXPECT_THAT(table, HasSubstr("vadd"));
}

// A row per call per repeat: a profile that would build more than 100000 is refused before it
// runs (repeat = 10^7 grew the worker until it died, and was reported as the function crashing).
TEST_F(ServiceTest, AProfileOfTooManyRowsIsRefusedBeforeItRuns) {
  v1::ProfileRequest request;
  for (int i = 0; i < 2; ++i) {
    auto* nop = request.add_calls();
    nop->set_module_id("builtin");
    nop->set_function("nop");
  }
  request.set_repeat(50'001);
  EXPECT_THAT(client_->Profile(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a profile of 2 call(s) x 50001 repeats would be over 100000 "
                                 "report rows")));
  request.set_repeat(10'000'000);
  EXPECT_THAT(client_->Profile(request).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  request.set_repeat(3);
  auto small = client_->Profile(request);
  ASSERT_THAT(small, IsOk());
  EXPECT_EQ(small->report().calls_size(), 6);
}

TEST(ReportConversion, ProtoRoundTripIsTheIdentity) {
  core::Report report;
  report.calls.push_back({{"Name", std::string("a \"q\"")},
                          {"Duration (us)", core::Duration{1.5}},
                          {"Count", core::Count{-3}},
                          {"Percent", core::Percent{12.5}},
                          {"Ratio", core::Ratio{0.25}}});
  report.device_metrics["cpu0"] = {{"Duration (us)", core::Duration{3}}};
  report.configuration = {{"Number of threads", core::Count{2}}};
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

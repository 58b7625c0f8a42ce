// Jobs on CUDA devices through a real kprofd: CUDA modules loaded and run, launches checked,
// the event timer, the L2 flush, a kernel fault, host code driving the device, NVML.
//
// Built twice. As cuda_fake_test (label integration) the daemon loads the stand-in driver of
// tests/support/fake_cuda, so everything up to the GPU runs on any host. As gpu_test (label
// gpu) it loads the system's driver, and skips, saying why, where there is no GPU.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/sha256.h"
#include "cli.h"
#include "client/farm.h"
#include "client/interleave.h"
#include "client/kprof_client.h"
#include "core/args/arg_spec.h"
#include "core/args/arguments.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "process_info.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;

constexpr int kN = 1 << 16;

class CudaJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef KPROF_FAKE_CUDA_DIR
    daemon_.set_env("LD_LIBRARY_PATH", KPROF_FAKE_CUDA_DIR);
    chmod(nvml_dir_.path().c_str(), 0755);
    daemon_.set_env("KPROF_FAKE_NVML_STATE", nvml_state_);
#endif
    ASSERT_TRUE(daemon_.Start(cache_.path() + "/cache"))
        << "kprofd did not start, status " << daemon_.exit_status();
    client::ClientOptions options;
    options.timeout = absl::Seconds(60);
    auto connected = client::Client::Connect(daemon_.target(), options);
    ASSERT_THAT(connected, IsOk());
    client_ = std::move(*connected);
    auto info = client_->Info();
    ASSERT_THAT(info, IsOk());
    for (const auto& d : info->devices()) {
      if (d.device() == "cuda:0") gpu_ = d;
    }
    if (gpu_.device().empty()) GTEST_SKIP() << "no CUDA device: " << info->cuda();
  }

  // The test kernels in the form asked for; a cubin for this GPU's architecture family (PTX
  // where none was built for it).
  std::string ModuleFile(const std::string& kind) const {
    const std::string dir = kprof::testing::TestModuleDir() + "/vector_add_cuda.";
    if (kind == "cubin") {
      const std::string cc = gpu_.compute_capability();
      const std::string cubin = dir + "sm_" + cc.substr(0, cc.find('.')) + "0.cubin";
      if (std::ifstream(cubin).good()) return cubin;
      return dir + "ptx";
    }
    return dir + kind;
  }

  // The test modules come from this build's nvcc; a driver older than it may not take its
  // PTX ISA or cubin ABI. That is the toolchain's limit, not kprofd's: the test says so.
  static bool TooNewForTheDriver(const absl::Status& status) {
    return absl::StrContains(status.message(), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION") ||
           absl::StrContains(status.message(), "CUDA_ERROR_NO_BINARY_FOR_GPU");
  }

  // The driver checks kernels' parameters from CUDA 12.4 on (cuFuncGetParamInfo).
  bool DriverListsParameters() const {
    const std::string& v = gpu_.driver_version();
    const int major = std::atoi(v.c_str());
    const int minor = std::atoi(v.substr(v.find('.') + 1).c_str());
    return major > 12 || (major == 12 && minor >= 4);
  }

  std::string Load(const std::string& kind) {
    auto module = client_->LoadModuleFile(ModuleFile(kind));
    EXPECT_THAT(module, IsOk()) << ModuleFile(kind);
    return module.ok() ? module->id() : "";
  }

  static v1::TimeEvaluateRequest Kernel(const std::string& module, const std::string& function,
                                        std::vector<std::string> args, int64_t grid,
                                        int64_t block) {
    v1::TimeEvaluateRequest request;
    request.set_device("cuda:0");
    request.mutable_call()->set_module_id(module);
    request.mutable_call()->set_function(function);
    for (auto& a : args) request.mutable_call()->add_args(a);
    request.mutable_call()->mutable_launch()->add_grid(grid);
    request.mutable_call()->mutable_launch()->add_block(block);
    return request;
  }

  static v1::TimeEvaluateRequest Vadd(const std::string& module) {
    const std::string n = std::to_string(kN);
    return Kernel(module, "vadd",
                  {"float32[" + n + "]:zeros", "float32[" + n + "]:random",
                   "float32[" + n + "]:random", "int32:" + n},
                  kN / 256, 256);
  }

  // SHA-256 of a + b computed here from the same generator the daemon uses.
  static std::string ExpectedSum(uint64_t seed) {
    const std::string n = std::to_string(kN);
    std::vector<float> a(kN), b(kN), c(kN);
    core::InitializeHostBytes(*core::ParseArgSpec("float32[" + n + "]:random"), seed, 1, a.data());
    core::InitializeHostBytes(*core::ParseArgSpec("float32[" + n + "]:random"), seed, 2, b.data());
    for (int i = 0; i < kN; ++i) c[i] = a[i] + b[i];
    return base::Sha256Hex(std::string_view(reinterpret_cast<const char*>(c.data()), c.size() * 4));
  }

  // `kprof time` of the kernel that spins 100 us, 3 repeats.
  ::kprof::testing::CliResult TimeSpinOnTheCli() const {
    return ::kprof::testing::RunKprof(
        daemon_.target(),
        "time " + ModuleFile("ptx") +
            " spin_ns --arg int64:100000 --device cuda:0 --grid 1 --block 1 --repeat 3",
        cache_.path());
  }

  // Where the stand-in NVML reads its GPU's SM clock and clock-event reasons.
  void SetFakeGpuClock(unsigned mhz, uint64_t reasons) const {
    std::ofstream(nvml_state_) << mhz << " 0x" << std::hex << reasons << "\n";
  }

  TempDir cache_;
  // Readable by the workers, which run as another user.
  TempDir nvml_dir_;
  std::string nvml_state_ = nvml_dir_.path() + "/nvml_state";
  Daemon daemon_;
  std::unique_ptr<client::Client> client_;
  v1::DeviceInfo gpu_;
};

TEST_F(CudaJobsTest, InfoDescribesTheGpu) {
  EXPECT_FALSE(gpu_.name().empty());
  EXPECT_THAT(gpu_.compute_capability(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  EXPECT_GT(gpu_.multiprocessors(), 0);
  EXPECT_GT(gpu_.memory_bytes(), 0u);
  EXPECT_GT(gpu_.l2_bytes(), 0);
  EXPECT_FALSE(gpu_.pci_bus_id().empty());
  EXPECT_FALSE(gpu_.driver_version().empty());
  // Described by a worker: the daemon itself loads neither the driver nor NVML.
  EXPECT_THAT(::kprof::testing::MappedFiles(daemon_.pid(), "libcuda"), ::testing::IsEmpty());
  EXPECT_THAT(::kprof::testing::MappedFiles(daemon_.pid(), "libnvidia-ml"), ::testing::IsEmpty());
}

#ifdef KPROF_FAKE_CUDA_DIR
// A CUDA driver that never answers cuInit costs the daemon its GPUs, not its start: the worker
// describing them is killed at --describe-timeout, and jobs on them say why.
TEST(CudaDescribeTest, AHungDriverLeavesTheDaemonServingWithoutGpus) {
  TempDir dir;
  Daemon daemon;
  daemon.set_env("LD_LIBRARY_PATH", KPROF_FAKE_CUDA_DIR);
  daemon.set_env("KPROF_FAKE_CUDA_HANG_INIT", "1");
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache", {"--describe-timeout", "3s"}))
      << "kprofd did not start, status " << daemon.exit_status();
  auto client = client::Client::Connect(daemon.target());
  ASSERT_THAT(client, IsOk());
  auto info = (*client)->Info();
  ASSERT_THAT(info, IsOk());
  ASSERT_EQ(info->devices_size(), 1);
  EXPECT_EQ(info->devices(0).device(), "cpu:0");
  EXPECT_GE(info->devices(0).collectors_size(), 3);  // rusage, perf, papi: described before
  const std::string hung = "the CUDA driver did not answer within 3s";
  EXPECT_THAT(info->cuda(), HasSubstr(hung));
  v1::TimeEvaluateRequest request;
  request.set_device("cuda:0");
  request.mutable_call()->set_module_id("builtin");
  request.mutable_call()->set_function("nop");
  EXPECT_THAT((*client)->TimeEvaluate(request),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(hung)));
  EXPECT_THAT(::kprof::testing::ChildProcesses(daemon.pid()), ::testing::IsEmpty());
}
#endif

// The same kernel from a cubin, a fatbin and PTX computes c = a + b, checked byte for byte.
class CudaFormatsTest : public CudaJobsTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(CudaFormatsTest, LoadsAndRunsTheKernel) {
  const std::string id = Load(GetParam());
  v1::TimeEvaluateRequest request = Vadd(id);
  request.set_seed(7);
  request.set_repeat(3);
  request.set_checksums(true);
  auto result = client_->TimeEvaluate(request);
  if (!result.ok() && TooNewForTheDriver(result.status())) {
    GTEST_SKIP() << "this driver (CUDA " << gpu_.driver_version() << ") does not take this build's "
                 << GetParam() << ": " << result.status();
  }
  ASSERT_THAT(result, IsOk());
  ASSERT_EQ(result->checksums_size(), 4);
  EXPECT_EQ(result->checksums(0), ExpectedSum(7));
  EXPECT_EQ(result->seconds_per_call_size(), 3);
  EXPECT_GT(result->statistics().mean(), 0);
  EXPECT_EQ(result->device(), "cuda:0");
  const auto& env = result->environment().metrics();
  ASSERT_TRUE(env.count("GPU")) << "the manifest names the GPU";
  EXPECT_THAT(env.at("GPU").string(), HasSubstr(gpu_.name()));
  EXPECT_TRUE(env.count("CUDA toolkit (build)"));
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaFormatsTest, ::testing::Values("cubin", "fatbin", "ptx"));

TEST_F(CudaJobsTest, LaunchesAreCheckedBeforeTheyRun) {
  const std::string id = Load("ptx");
  v1::TimeEvaluateRequest too_wide = Vadd(id);
  too_wide.mutable_call()->mutable_launch()->set_block(0, 4096);
  EXPECT_THAT(client_->TimeEvaluate(too_wide),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block.x = 4096 exceeds")));
  v1::TimeEvaluateRequest empty = Vadd(id);
  empty.mutable_call()->mutable_launch()->set_grid(0, 0);
  EXPECT_THAT(client_->TimeEvaluate(empty),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("grid.x = 0")));
  v1::TimeEvaluateRequest no_launch = Vadd(id);
  no_launch.mutable_call()->clear_launch();
  EXPECT_THAT(
      client_->TimeEvaluate(no_launch),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs a launch configuration")));
  v1::TimeEvaluateRequest four_dims = Vadd(id);
  for (int i = 0; i < 3; ++i) four_dims.mutable_call()->mutable_launch()->add_grid(1);
  EXPECT_THAT(client_->TimeEvaluate(four_dims),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("launch.grid has 4")));
  v1::TimeEvaluateRequest shared = Vadd(id);
  shared.mutable_call()->mutable_launch()->set_shared_bytes(int64_t{1} << 30);
  EXPECT_THAT(client_->TimeEvaluate(shared),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dynamic shared memory")));
  v1::TimeEvaluateRequest missing = Vadd(id);
  missing.mutable_call()->set_function("vsub");
  EXPECT_THAT(client_->TimeEvaluate(missing),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("vsub")));
  if (DriverListsParameters()) {
    v1::TimeEvaluateRequest too_few = Vadd(id);
    too_few.mutable_call()->mutable_args()->RemoveLast();
    EXPECT_THAT(client_->TimeEvaluate(too_few),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("kernel 'vadd' takes 4 parameters; the job gives 3")));
    v1::TimeEvaluateRequest wide = Vadd(id);
    *wide.mutable_call()->mutable_args(3) = "int64:" + std::to_string(kN);
    EXPECT_THAT(client_->TimeEvaluate(wide),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("argument 3 is 8 bytes as a kernel parameter, but parameter 3 "
                                   "of kernel 'vadd' is 4 bytes")));
  }
  v1::TimeEvaluateRequest big_flush = Vadd(id);
  big_flush.set_cache_flush_bytes(int64_t{1} << 40);
  EXPECT_THAT(client_->TimeEvaluate(big_flush),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("cache_flush_bytes")));
  // The worker is fine after all of them.
  EXPECT_THAT(client_->TimeEvaluate(Vadd(id)), IsOk());
}

// The driver trusts a fatbin's header for its length: one claiming more than was sent is
// refused at upload.
TEST_F(CudaJobsTest, ATruncatedFatbinIsRefusedAtUpload) {
  std::ifstream in(ModuleFile("fatbin"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(bytes.size(), 64u);
  bytes.resize(bytes.size() / 2);
  EXPECT_THAT(client_->LoadModule(bytes, "cut.fatbin"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid fatbin")));
}

TEST_F(CudaJobsTest, PtxThatDoesNotCompileGivesTheJitLog) {
  const std::string bad =
      "//\n.version 7.0\n.target sm_80\n.address_size 64\n\n.visible .entry broken()\n{\n"
      "  bogus.instruction;\n  ret;\n}\n";
  auto module = client_->LoadModule(bad, "broken.ptx");
  ASSERT_THAT(module, IsOk());
  EXPECT_EQ(module->format(), "ptx");
  EXPECT_THAT(client_->TimeEvaluate(Kernel(module->id(), "broken", {}, 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("cannot load the ptx module on cuda:0"),
                             HasSubstr("JIT log"), HasSubstr("bogus"))));
}

// A kernel that runs 2 ms by the GPU's own clock measures 2 ms with the event timer.
TEST_F(CudaJobsTest, EventTimerMeasuresAKernelOfKnownDuration) {
  const std::string id = Load("ptx");
  v1::TimeEvaluateRequest request = Kernel(id, "spin_ns", {"int64:2000000"}, 1, 1);
  request.set_repeat(5);
  auto result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_GE(result->statistics().min(), 1.99e-3);
#ifdef KPROF_FAKE_CUDA_DIR
  // The stand-in's kernel spins on a host CPU, which a loaded host may take away for a while.
  EXPECT_LT(result->statistics().median(), 50e-3);
#else
  EXPECT_LT(result->statistics().median(), 2.5e-3);
#endif
}

// A kernel's answer is read back after the device synchronises and checked in the daemon:
// against the same kernel launched alike (in a worker of its own), and against expected data
// computed here, right and then one element off.
TEST_F(CudaJobsTest, AKernelsAnswerIsCheckedAgainstAReferenceOnTheDevice) {
  const std::string id = Load("ptx");
  v1::TimeEvaluateRequest request = Vadd(id);
  request.set_repeat(2);
  request.set_seed(5);
  request.mutable_check()->mutable_reference()->set_module_id(id);
  request.mutable_check()->mutable_reference()->set_function("vadd");
  auto checked = client_->TimeEvaluate(request);
  ASSERT_THAT(checked, IsOk());
  EXPECT_EQ(checked->check().outcome(), v1::CheckVerdict::PASSED);
  EXPECT_EQ(checked->check().outputs_size(), 1);
  EXPECT_EQ(checked->check().outputs(0), 0);

  const std::string n = std::to_string(kN);
  std::vector<float> a(kN), b(kN), c(kN);
  core::InitializeHostBytes(*core::ParseArgSpec("float32[" + n + "]:random"), 5, 1, a.data());
  core::InitializeHostBytes(*core::ParseArgSpec("float32[" + n + "]:random"), 5, 2, b.data());
  for (int i = 0; i < kN; ++i) c[i] = a[i] + b[i];
  request.mutable_check()->clear_reference();
  v1::ExpectedOutput* expected = request.mutable_check()->add_expected();
  expected->set_dtype("float32");
  expected->add_shape(kN);
  expected->set_data(std::string(reinterpret_cast<const char*>(c.data()), c.size() * 4));
  auto right = client_->TimeEvaluate(request);
  ASSERT_THAT(right, IsOk());
  EXPECT_EQ(right->check().reference(), "expected data");
  c[kN - 1] += 1;
  expected->set_data(std::string(reinterpret_cast<const char*>(c.data()), c.size() * 4));
  EXPECT_THAT(client_->TimeEvaluate(request).status(),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr(absl::StrCat("1 of ", kN, " elements differ"))));
}

// A graph of 10 launches of a 200 us kernel: each timed call replays it, and the time is per
// launch; the graph's launches compute what the kernel computes.
TEST_F(CudaJobsTest, ACudaGraphIsTimedPerLaunch) {
  const std::string id = Load("ptx");
  v1::TimeEvaluateRequest request = Kernel(id, "spin_ns", {"int64:200000"}, 1, 1);
  request.set_repeat(3);
  request.set_number(2);
  request.set_cuda_graph(10);
  auto result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->cuda_graph(), 10);
  for (int64_t n : result->numbers()) EXPECT_EQ(n, 20);  // 2 replays of 10 launches
  EXPECT_GE(result->statistics().min(), 199e-6);
#ifdef KPROF_FAKE_CUDA_DIR
  EXPECT_LT(result->statistics().median(), 5e-3);
#else
  EXPECT_LT(result->statistics().median(), 250e-6);
#endif
  v1::TimeEvaluateRequest vadd = Vadd(id);
  vadd.set_cuda_graph(4);
  vadd.set_checksums(true);
  result = client_->TimeEvaluate(vadd);
  ASSERT_THAT(result, IsOk());
  ASSERT_EQ(result->checksums_size(), 4);
  EXPECT_EQ(result->checksums(0), ExpectedSum(0));
}

TEST_F(CudaJobsTest, ACudaGraphIsRefusedWhereItCannotBe) {
  const std::string id = Load("ptx");
  v1::TimeEvaluateRequest request = Kernel(id, "spin_ns", {"int64:1000"}, 1, 1);
  request.set_cuda_graph(-1);
  EXPECT_THAT(client_->TimeEvaluate(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cuda_graph = -1")));
  request.set_cuda_graph(4);
  request.set_randomize_layout(true);
  EXPECT_THAT(client_->TimeEvaluate(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not both")));
  v1::TimeEvaluateRequest on_cpu;
  on_cpu.mutable_call()->set_module_id("builtin");
  on_cpu.mutable_call()->set_function("nop");
  on_cpu.set_cuda_graph(4);
  EXPECT_THAT(client_->TimeEvaluate(on_cpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a CUDA device")));
  auto module = client_->LoadModuleFile(TestModulePath("device_probe"));
  ASSERT_THAT(module, IsOk());
  v1::TimeEvaluateRequest host =
      Kernel(module->id(), "on_cuda", {"float32[64]:ones", "int64:3"}, 1, 1);
  host.mutable_call()->clear_launch();
  host.set_cuda_graph(4);
  EXPECT_THAT(client_->TimeEvaluate(host),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("captures kernel launches")));
}

TEST_F(CudaJobsTest, FlushL2WritesABufferBeforeEachRepeat) {
  const std::string id = Load("ptx");
  v1::TimeEvaluateRequest request = Vadd(id);
  request.set_flush_l2(true);
  request.set_repeat(3);
  EXPECT_THAT(client_->TimeEvaluate(request), IsOk());
  v1::TimeEvaluateRequest on_cpu;
  on_cpu.mutable_call()->set_module_id("builtin");
  on_cpu.mutable_call()->set_function("spin_us");
  on_cpu.mutable_call()->add_args("float64:10");
  on_cpu.set_flush_l2(true);
  EXPECT_THAT(client_->TimeEvaluate(on_cpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cache_flush_bytes")));
}

// An illegal address poisons the context: the job is ABORTED naming the CUDA error, the worker
// is replaced, and the next job runs.
TEST_F(CudaJobsTest, AKernelFaultAbortsTheJobAndTheWorkerIsReplaced) {
  const std::string id = Load("ptx");
  EXPECT_THAT(client_->TimeEvaluate(Kernel(id, "fault", {"float32[256]:zeros"}, 1, 1)),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"), HasSubstr("replaced"))));
  v1::TimeEvaluateRequest after = Vadd(id);
  after.set_checksums(true);
  auto result = client_->TimeEvaluate(after);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->checksums(0), ExpectedSum(0));
}

// A host library on a GPU gets tensors in device memory (kDLCUDA) and scalars in host memory.
TEST_F(CudaJobsTest, HostLibrariesGetDevicePointers) {
  auto module = client_->LoadModuleFile(TestModulePath("device_probe"));
  ASSERT_THAT(module, IsOk());
  v1::TimeEvaluateRequest request =
      Kernel(module->id(), "on_cuda", {"float32[64]:ones", "int64:3"}, 1, 1);
  EXPECT_THAT(client_->TimeEvaluate(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host function")));
  request.mutable_call()->clear_launch();
  EXPECT_THAT(client_->TimeEvaluate(request), IsOk());
}

// Host functions on a GPU that hand their work elsewhere (tests/modules/cuda_cheats.c). On a
// stream of their own: no gain, since a host function's time ends with the whole device
// synchronised, so its median is its honest twin's. To a thread named as the driver names its
// own: the call returns at once, and strict checks refuse it for the thread it left running.
TEST_F(CudaJobsTest, HostFunctionsThatHandTheirWorkElsewhereGainNothingOrAreRefused) {
  auto module = client_->LoadModuleFile(TestModulePath("cuda_cheats"));
  ASSERT_THAT(module, IsOk());
  const std::string reference = Load("ptx");
  const auto request = [&](const std::string& function) {
    v1::TimeEvaluateRequest r = Vadd(module->id());
    r.mutable_call()->set_function(function);
    r.mutable_call()->clear_launch();
    r.set_repeat(10);
    v1::ReferenceCall* call = r.mutable_check()->mutable_reference();
    call->set_module_id(reference);
    call->set_function("vadd");
    call->add_grid(kN / 256);
    call->add_block(256);
    r.mutable_check()->set_level(v1::AnswerCheck::STRICT);
    return r;
  };
  auto honest = client_->TimeEvaluate(request("vadd_default_stream"));
  if (!honest.ok() && TooNewForTheDriver(honest.status())) GTEST_SKIP() << honest.status();
  ASSERT_THAT(honest, IsOk());
  EXPECT_EQ(honest->check().outcome(), v1::CheckVerdict::PASSED);
  auto other = client_->TimeEvaluate(request("vadd_other_stream"));
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(other->check().outcome(), v1::CheckVerdict::PASSED);
  // Its 16 launches are in its time: not a launch's cost alone (a small fraction of them).
  EXPECT_GT(other->statistics().median(), 0.3 * honest->statistics().median())
      << "vadd_other_stream " << other->statistics().median() << " s, vadd_default_stream "
      << honest->statistics().median() << " s";
  EXPECT_THAT(
      client_->TimeEvaluate(request("vadd_in_driver_thread")),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("thread(s) still running when it returned")));
}

// The CLI's kernel options: --grid and --block (x,y,z), --flush-l2; info shows the GPU.
TEST_F(CudaJobsTest, TheCliLaunchesKernels) {
  const std::string scratch = cache_.path();
  const auto kprof = [&](const std::string& args) {
    return ::kprof::testing::RunKprof(daemon_.target(), args, scratch);
  };
  const auto info = kprof("info");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("cuda:0  " + gpu_.name()));
  EXPECT_THAT(info.out, HasSubstr("PCI " + gpu_.pci_bus_id()));

  const std::string args =
      " --arg float32[4096]:zeros --arg float32[4096]:ones --arg float32[4096]:ones --arg "
      "int32:4096";
  const auto timed = kprof("--format json time " + ModuleFile("ptx") +
                           " vadd --device cuda:0 --grid 16 --block 256,1,1 --flush-l2 "
                           "--checksums --repeat 2" +
                           args);
  ASSERT_EQ(timed.exit_code, 0) << timed.err;
  EXPECT_THAT(timed.out, HasSubstr("\"device\": \"cuda:0\""));
  // c = 1 + 1 everywhere: the SHA-256 of 4096 float32 twos.
  const std::vector<float> twos(4096, 2.0f);
  EXPECT_THAT(timed.out, HasSubstr(base::Sha256Hex(std::string_view(
                             reinterpret_cast<const char*>(twos.data()), twos.size() * 4))));

  const auto half = kprof("time " + ModuleFile("ptx") + " vadd --device cuda:0 --grid 16" + args);
  EXPECT_NE(half.exit_code, 0);
  EXPECT_THAT(half.err, HasSubstr("needs both --grid and --block"));
  const auto words =
      kprof("time " + ModuleFile("ptx") + " vadd --device cuda:0 --grid 16 --block many" + args);
  EXPECT_NE(words.exit_code, 0);
  EXPECT_THAT(words.err, HasSubstr("--block 'many'"));
}

TEST_F(CudaJobsTest, NvmlMeasuresTheGpusEnergy) {
  bool listed = false;
  for (const auto& c : gpu_.collectors()) listed |= c.name() == "nvml";
  if (!listed) GTEST_SKIP() << "NVML is not on this host";
  const std::string id = Load("ptx");
  v1::ProfileFunctionRequest request;
  request.set_device("cuda:0");
  request.mutable_call()->set_module_id(id);
  request.mutable_call()->set_function("spin_ns");
  request.mutable_call()->add_args("int64:200000000");  // 200 ms
  request.mutable_call()->mutable_launch()->add_grid(1);
  request.mutable_call()->mutable_launch()->add_block(1);
  request.add_collectors()->set_name("nvml");
  auto result = client_->ProfileFunction(request);
  ASSERT_THAT(result, IsOk());
  ASSERT_EQ(result->report().calls_size(), 1);
  const auto& row = result->report().calls(0).metrics();
  ASSERT_TRUE(row.count("GPU energy (mJ)"));
  EXPECT_GT(row.at("GPU energy (mJ)").count(), 0);
  EXPECT_GT(row.at("GPU power (W)").ratio(), 0);
}

TEST_F(CudaJobsTest, RepeatsWhileTheGpuClockIsLowAreMarkedWithNvmlsReasons) {
  bool listed = false;
  for (const auto& c : gpu_.collectors()) listed |= c.name() == "nvml";
  if (!listed) GTEST_SKIP() << "NVML is not on this host";
  const std::string id = Load("ptx");
  v1::TimeEvaluateRequest request = Kernel(id, "spin_ns", {"int64:100000"}, 1, 1);
  request.set_repeat(3);
  request.set_min_repeat_ms(1);
  auto result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  // The GPU's clock is watched: only the CPU's may be beyond telling (no cpufreq on a VM).
  EXPECT_THAT(result->throttle_check(), ::testing::Not(HasSubstr("GPU")));
  for (const auto& reason : result->clock_reasons()) {
    EXPECT_NE(reason.reason(), "GpuIdle");
    for (int32_t i : reason.repeats()) EXPECT_LT(i, result->seconds_per_call_size());
  }
#ifdef KPROF_FAKE_CUDA_DIR
  EXPECT_EQ(result->throttled_repeats_size(), 0);
  EXPECT_EQ(result->clock_reasons_size(), 0);

  // Half the clock, held back for heat: every repeat marked, with its reason.
  SetFakeGpuClock(990, 0x40);
  result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_THAT(result->throttled_repeats(), ::testing::ElementsAre(0, 1, 2));
  ASSERT_EQ(result->clock_reasons_size(), 1);
  EXPECT_EQ(result->clock_reasons(0).reason(), "HwThermalSlowdown");
  EXPECT_THAT(result->clock_reasons(0).repeats(), ::testing::ElementsAre(0, 1, 2));
  const auto cli = TimeSpinOnTheCli();
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_THAT(cli.out, HasSubstr("3 throttled repeat(s)"));
  EXPECT_THAT(cli.out, HasSubstr("GPU clock held back (HwThermalSlowdown) in 3 repeat(s)"));

  // Dropping them leaves nothing, and says which clock it was.
  request.set_discard_throttled(true);
  EXPECT_THAT(client_->TimeEvaluate(request),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("all 3 repeats were throttled (the GPU clock was below 75% of its "
                                 "nominal 1980 MHz)")));

  // Half of 1980 MHz is above a threshold of 40%: nothing throttled, the reason still said.
  request.set_throttle_threshold(0.4);
  result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->discarded_throttled(), 0);
  EXPECT_EQ(result->seconds_per_call_size(), 3);
  ASSERT_EQ(result->clock_reasons_size(), 1);

  // An idle GPU at full clock: nothing to say.
  SetFakeGpuClock(1980, 0x1);
  result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->clock_reasons_size(), 0);
#endif
}

#ifdef KPROF_FAKE_CUDA_DIR
// Another process computing on the GPU during a measurement is named in its warnings, so that
// compare and rank call the result noisy; the daemon's own workers, which hold contexts on the
// GPU but run nothing meanwhile, are not another process.
TEST_F(CudaJobsTest, AnotherProcessOnTheGpuIsNamedAndTheDaemonsWorkersAreNot) {
  const std::string id = Load("ptx");
  v1::TimeEvaluateRequest request = Kernel(id, "spin_ns", {"int64:100000"}, 1, 1);
  request.set_repeat(3);
  const auto warned = [&](const v1::TimeEvaluateResponse& r) {
    for (const std::string& w : r.warnings()) {
      if (absl::StrContains(w, "computed on cuda:0")) return w;
    }
    return std::string();
  };
  auto result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(warned(*result), "");

  // The daemon's workers (every child of it) listed on the GPU: still nothing to say.
  const std::vector<pid_t> workers = ::kprof::testing::ChildProcesses(daemon_.pid());
  ASSERT_FALSE(workers.empty());
  {
    std::ofstream processes(nvml_state_ + ".processes");
    for (pid_t worker : workers) {
      processes << worker << " 300\n";
    }
  }
  result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(warned(*result), "");

  // This test's process is another: named, with its memory.
  std::ofstream(nvml_state_ + ".processes") << getpid() << " 512\n";
  result = client_->TimeEvaluate(request);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(warned(*result), "another process computed on cuda:0 during the measurement: pid " +
                                 std::to_string(getpid()) + " (512 MiB)");
  const auto cli = TimeSpinOnTheCli();
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_THAT(cli.out, HasSubstr("another process computed on cuda:0"));
  std::remove((nvml_state_ + ".processes").c_str());
}

// Interleaved candidates on a GPU whose clock is low: each repeat, run as a job of its own, comes
// back marked with its reason, merged in the candidate's order; discarding them leaves nothing,
// and each candidate fails saying so.
TEST_F(CudaJobsTest, AnInterleavedBatchMarksOrDropsTheThrottledRepeats) {
  const std::string id = Load("ptx");
  std::vector<v1::BatchJob> jobs(2);
  for (size_t j = 0; j < jobs.size(); ++j) {
    jobs[j].set_id(j == 0 ? "short" : "long");
    *jobs[j].mutable_time_evaluate() =
        Kernel(id, "spin_ns", {j == 0 ? "int64:50000" : "int64:100000"}, 1, 1);
    jobs[j].mutable_time_evaluate()->set_repeat(3);
  }
  auto farm = client::Farm::Connect(daemon_.target());
  ASSERT_THAT(farm, IsOk());
  SetFakeGpuClock(990, 0x40);
  std::map<std::string, v1::BatchUpdate> last;
  const auto keep = [&](const v1::BatchUpdate& u) { last[u.id()] = u; };
  ASSERT_THAT(client::MeasureInterleaved(**farm, jobs, 11, keep), IsOk());
  for (const v1::BatchJob& job : jobs) {
    const v1::BatchUpdate& u = last[job.id()];
    ASSERT_EQ(u.state(), v1::BatchUpdate::DONE) << job.id() << ": " << u.message();
    EXPECT_THAT(u.time_evaluate().throttled_repeats(), ::testing::ElementsAre(0, 1, 2));
    ASSERT_EQ(u.time_evaluate().clock_reasons_size(), 1);
    EXPECT_EQ(u.time_evaluate().clock_reasons(0).reason(), "HwThermalSlowdown");
    EXPECT_THAT(u.time_evaluate().clock_reasons(0).repeats(), ::testing::ElementsAre(0, 1, 2));
  }

  for (v1::BatchJob& job : jobs) job.mutable_time_evaluate()->set_discard_throttled(true);
  last.clear();
  ASSERT_THAT(client::MeasureInterleaved(**farm, jobs, 11, keep), IsOk());
  for (const v1::BatchJob& job : jobs) {
    const v1::BatchUpdate& u = last[job.id()];
    EXPECT_EQ(u.state(), v1::BatchUpdate::FAILED) << job.id();
    EXPECT_EQ(u.code(), static_cast<int32_t>(absl::StatusCode::kFailedPrecondition));
    EXPECT_THAT(u.message(), HasSubstr("all 3 repeats were throttled"));
  }

  // At full clock again nothing is dropped.
  SetFakeGpuClock(1980, 0);
  last.clear();
  ASSERT_THAT(client::MeasureInterleaved(**farm, jobs, 11, keep), IsOk());
  for (const v1::BatchJob& job : jobs) {
    const v1::BatchUpdate& u = last[job.id()];
    ASSERT_EQ(u.state(), v1::BatchUpdate::DONE) << job.id() << ": " << u.message();
    EXPECT_EQ(u.time_evaluate().seconds_per_call_size(), 3);
    EXPECT_EQ(u.time_evaluate().discarded_throttled(), 0);
    EXPECT_EQ(u.time_evaluate().throttled_repeats_size(), 0);
  }
}
#endif

}  // namespace
}  // namespace kprof

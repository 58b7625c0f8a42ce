// CUDA without a GPU: what a module's bytes are, launch configurations against device limits,
// kernel parameter packing, and the driver's absence said plainly. The GPU tests (label gpu)
// are in gpu_test.cc.
#include <cstring>
#include <string>

#include "core/cuda/cuda_devices.h"
#include "core/cuda/cuda_image.h"
#include "core/cuda/kernel_params.h"
#include "core/cuda/launch_config.h"
#include "core/modules/module_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/config.h"
#include "module_files.h"
#include "status_matchers.h"

#if KPROF_HAS_CUDA
#include "core/cuda/cuda_driver.h"
#endif

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Optional;

TEST(CudaImage, SniffsHandMadeHeaders) {
  std::string cubin(64, '\0');
  std::memcpy(cubin.data(),
              "\x7f"
              "ELF\x02\x01\x01",
              7);
  cubin[18] = static_cast<char>(190);  // EM_CUDA, little-endian
  EXPECT_THAT(SniffCudaImage(cubin), Optional(CudaImageKind::kCubin));
  std::string x86 = cubin;
  x86[18] = 62;  // EM_X86_64: a host library, not CUDA code
  EXPECT_EQ(SniffCudaImage(x86), std::nullopt);
  EXPECT_THAT(SniffCudaImage(std::string("\x50\xed\x55\xba\x01\x00\x10\x00", 8) + "payload"),
              Optional(CudaImageKind::kFatbin));
  EXPECT_THAT(SniffCudaImage("//\n.version 8.0\n.target sm_80\n.address_size 64\n"),
              Optional(CudaImageKind::kPtx));
  EXPECT_EQ(SniffCudaImage(".version 8.0 without a target"), std::nullopt);
  EXPECT_EQ(SniffCudaImage(std::string(".version\0.target", 16)), std::nullopt);  // not text
  EXPECT_EQ(SniffCudaImage(""), std::nullopt);
  EXPECT_EQ(SniffCudaImage("\x7f"
                           "ELF"),
            std::nullopt);  // truncated
  EXPECT_EQ(CudaImageKindName(CudaImageKind::kFatbin), "fatbin");
}

TEST(CudaImage, HostLibrariesAreNotCudaCode) {
  EXPECT_EQ(SniffCudaImage(ReadFileBytes(kprof::testing::TestModulePath("vector_add"))),
            std::nullopt);
}

#ifdef KPROF_TEST_CUDA_IMAGES
// What nvcc made of tests/modules/vector_add_cuda.cu.
TEST(CudaImage, SniffsWhatNvccMade) {
  const std::string dir = kprof::testing::TestModuleDir();
  EXPECT_THAT(SniffCudaImage(ReadFileBytes(dir + "/vector_add_cuda.cubin")),
              Optional(CudaImageKind::kCubin));
  EXPECT_THAT(SniffCudaImage(ReadFileBytes(dir + "/vector_add_cuda.fatbin")),
              Optional(CudaImageKind::kFatbin));
  EXPECT_THAT(SniffCudaImage(ReadFileBytes(dir + "/vector_add_cuda.ptx")),
              Optional(CudaImageKind::kPtx));
}

TEST(ModuleFormat, DescribesWhatNvccMade) {
  const std::string dir = kprof::testing::TestModuleDir();
  const std::string cubin = ReadFileBytes(dir + "/vector_add_cuda.cubin");
  auto described = DescribeModule(cubin, "auto");
  ASSERT_THAT(described, IsOk());
  EXPECT_EQ(described->format, "cubin");
  EXPECT_THAT(described->functions, ElementsAre("fault", "spin_ns", "vadd"));
  EXPECT_THAT(
      DescribeModule(ReadFileBytes(dir + "/vector_add_cuda.ptx"), "ptx"),
      IsOkAndHolds(Field(&ModuleDescription::functions, ElementsAre("fault", "spin_ns", "vadd"))));
  EXPECT_THAT(DescribeModule(ReadFileBytes(dir + "/vector_add_cuda.fatbin"), ""),
              IsOkAndHolds(Field(&ModuleDescription::format, "fatbin")));
  // A cubin cut short is an error naming what is missing, never a read past the end.
  EXPECT_THAT(DescribeModule(cubin.substr(0, cubin.size() / 2), "cubin"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid cubin: truncated")));
}
#endif

TEST(ModuleFormat, DeclaredFormatsMustMatchTheBytes) {
  const std::string ptx = "//\n.version 8.0\n.target sm_80\n.visible .entry k1(\n)\n{ ret; }\n";
  EXPECT_THAT(DescribeModule(ptx, "cubin"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("declared cubin, but the bytes are ptx")));
  EXPECT_THAT(DescribeModule(ptx, "wasm"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'wasm' is unknown")));
  EXPECT_THAT(DescribeModule(".version 8.0\n.target sm_80\n.func helper()\n", "auto"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no .entry kernel")));
  // A host library declared as one is inspected as one.
  EXPECT_THAT(
      DescribeModule(ReadFileBytes(kprof::testing::TestModulePath("vector_add")), "shared-library"),
      IsOkAndHolds(Field(&ModuleDescription::format, "shared-library")));
}

TEST(ModuleFormat, PtxKernelsAreTheEntryDirectives) {
  EXPECT_THAT(PtxKernels(".visible .entry b(\n.param .u64 p)\n.entry a (\n"
                         "// .entry not_a_kernel_in_a_comment_word.entry x\n"
                         ".weak .entry $c_1(\n.func f(\n"),
              ElementsAre("$c_1", "a", "b"));
  EXPECT_TRUE(PtxKernels(".version 8.0").empty());
}

TEST(LaunchConfig, WithinTheLimitsIsOk) {
  LaunchConfig config;
  config.grid = {1 << 20, 1, 1};
  config.block = {256, 4, 1};
  config.shared_bytes = 1024;
  EXPECT_THAT(ValidateLaunch(config, LaunchLimits{}), IsOk());
}

TEST(LaunchConfig, EachLimitIsNamed) {
  const LaunchLimits limits;
  const auto check = [&](void (*set)(LaunchConfig&), const char* message) {
    LaunchConfig config;
    set(config);
    EXPECT_THAT(ValidateLaunch(config, limits),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
  };
  check([](LaunchConfig& c) { c.grid[1] = 0; }, "grid.y = 0: each dimension is at least 1");
  check([](LaunchConfig& c) { c.block[0] = -3; }, "block.x = -3");
  check([](LaunchConfig& c) { c.block[0] = 2048; }, "block.x = 2048 exceeds this device's 1024");
  check([](LaunchConfig& c) { c.block[2] = 65; }, "block.z = 65 exceeds this device's 64");
  check([](LaunchConfig& c) { c.grid[2] = 70000; }, "grid.z = 70000 exceeds this device's 65535");
  check([](LaunchConfig& c) { c.block = {64, 32, 1}; }, "block has 2048 threads");
  check([](LaunchConfig& c) { c.shared_bytes = 64 << 10; }, "dynamic shared memory of 65536");
  check([](LaunchConfig& c) { c.shared_bytes = -1; }, "dynamic shared memory of -1");
}

TEST(KernelParams, TensorsByAddressScalarsByValue) {
  float data[4] = {0};
  float a = 2.5f;
  int64_t n = 1234567890123;
  uint8_t flag = 1;
  DLTensor args[4] = {};
  int64_t shape[1] = {4};
  args[0].data = data;
  args[0].ndim = 1;
  args[0].shape = shape;
  args[0].byte_offset = 8;
  args[0].dtype = {kDLFloat, 32, 1};
  args[1].data = &a;
  args[1].dtype = {kDLFloat, 32, 1};
  args[2].data = &n;
  args[2].dtype = {kDLInt, 64, 1};
  args[3].data = &flag;
  args[3].dtype = {kDLUInt, 8, 1};
  auto params = KernelParams::Pack(args, 4);
  ASSERT_THAT(params, IsOk());
  ASSERT_EQ(params->size(), 4u);
  uint64_t address = 0;
  std::memcpy(&address, params->value(0), 8);
  EXPECT_EQ(address, reinterpret_cast<uintptr_t>(data) + 8);
  EXPECT_EQ(params->value_size(1), 4u);
  EXPECT_EQ(*reinterpret_cast<float*>(params->pointers()[1]), 2.5f);
  EXPECT_EQ(*reinterpret_cast<int64_t*>(params->pointers()[2]), n);
  EXPECT_EQ(*reinterpret_cast<uint8_t*>(params->pointers()[3]), 1);
  // A moved pack points into itself.
  KernelParams moved = *std::move(params);
  EXPECT_EQ(moved.pointers()[1], static_cast<const void*>(moved.value(1)));
}

TEST(KernelParams, ScalarsAKernelCannotTakeAreInvalidArgument) {
  double wide[2] = {1, 2};
  DLTensor args[1] = {};
  args[0].data = wide;
  args[0].dtype = {kDLFloat, 64, 2};  // two lanes
  EXPECT_THAT(KernelParams::Pack(args, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("argument 0")));
}

TEST(CudaDevices, WithoutADriverSaysWhy) {
  const auto devices = CudaDevices();
  if (devices.ok()) GTEST_SKIP() << "this host has a CUDA device";
  EXPECT_THAT(devices,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AnyOf(HasSubstr("libcuda.so.1 not found"), HasSubstr("built without CUDA"),
                             HasSubstr("cuInit"), HasSubstr("no device"))));
  EXPECT_EQ(CudaVersionText(12040), "12.4");
}

#if KPROF_HAS_CUDA
TEST(CudaDriver, AMissingLibraryOrANonDriverIsFailedPrecondition) {
  EXPECT_THAT(CudaDriver::Open("libkprof-no-such-driver.so.1"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("libkprof-no-such-driver.so.1 not found")));
  EXPECT_THAT(CudaDriver::Open("libc.so.6"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("libc.so.6 has no cuGetProcAddress")));
}
#endif

}  // namespace
}  // namespace kprof::core

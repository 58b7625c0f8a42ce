#include "core/device/device_api.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cuda/cuda_devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/config.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

TEST(CpuDeviceApi, AllocatesAlignedMemoryThatCopiesAndSets) {
  DeviceApi* api = *GetDeviceApi(base::DeviceType::kCpu);
  auto a = api->Alloc(kCpu, 1000);
  auto b = api->Alloc(kCpu, 1000);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % DeviceApi::kAllocAlignment, 0u);
  ASSERT_THAT(api->Memset(kCpu, *a, 0xAB, 1000), IsOk());
  ASSERT_THAT(api->Copy(kCpu, *b, *a, 1000, CopyKind::kDeviceToDevice), IsOk());
  EXPECT_EQ(static_cast<unsigned char*>(*b)[999], 0xAB);
  ASSERT_THAT(api->FlushCache(kCpu, *b, 1000), IsOk());
  EXPECT_EQ(static_cast<unsigned char*>(*b)[0], 0xAB);  // flushing keeps the data
  api->Free(kCpu, *a);
  api->Free(kCpu, *b);
  api->Free(kCpu, nullptr);
}

TEST(CpuDeviceApi, ZeroBytesGiveDistinctPointers) {
  DeviceApi* api = *GetDeviceApi(base::DeviceType::kCpu);
  void* a = *api->Alloc(kCpu, 0);
  void* b = *api->Alloc(kCpu, 0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  api->Free(kCpu, a);
  api->Free(kCpu, b);
}

TEST(CpuDeviceApi, ImpossibleAllocationIsResourceExhausted) {
  DeviceApi* api = *GetDeviceApi(base::DeviceType::kCpu);
  EXPECT_THAT(api->Alloc(kCpu, SIZE_MAX - 8),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("bytes on cpu0")));
  EXPECT_THAT(api->Alloc(kCpu, SIZE_MAX / 2),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("cannot allocate")));
}

#if KPROF_HAS_CUDA
// The API exists in a CUDA build; on a host without a GPU, using it says why it cannot.
TEST(GetDeviceApi, CudaAllocatesOrSaysWhyNot) {
  absl::StatusOr<DeviceApi*> api = GetDeviceApi(base::DeviceType::kCuda);
  ASSERT_THAT(api, IsOk());
  absl::StatusOr<void*> ptr = (*api)->Alloc({base::DeviceType::kCuda, 0}, 1024);
  if (const absl::StatusOr<CudaInventory> gpus = CudaDevices(); gpus.ok()) {
    ASSERT_THAT(ptr, IsOk());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*ptr) % DeviceApi::kAllocAlignment, 0u);
    (*api)->Free({base::DeviceType::kCuda, 0}, *ptr);
  } else {
    EXPECT_THAT(ptr, StatusIs(absl::StatusCode::kFailedPrecondition,
                              HasSubstr(std::string(gpus.status().message()))));
  }
}
#else
TEST(GetDeviceApi, CudaIsNotInThisBuild) {
  EXPECT_THAT(GetDeviceApi(base::DeviceType::kCuda),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("this build has no CUDA")));
}
#endif

}  // namespace
}  // namespace kprof::core

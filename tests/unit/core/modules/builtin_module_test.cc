#include "core/modules/builtin_module.h"

#include <vector>

#include "core/args/arguments.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

// Allocates `specs`, checks them against `function`, calls it; returns the arguments after.
std::unique_ptr<Arguments> CallBuiltin(std::string_view function,
                                       const std::vector<std::string>& specs,
                                       absl::Status* check = nullptr) {
  std::vector<ArgSpec> parsed;
  for (const auto& s : specs) parsed.push_back(*ParseArgSpec(s));
  auto args = Arguments::Allocate(parsed, 0, kCpu);
  EXPECT_THAT(args, IsOk());
  auto f = BuiltinModule().GetFunction(function);
  EXPECT_THAT(f, IsOk());
  const absl::Status status = f->check_arguments((*args)->tensors(), (*args)->size());
  if (check != nullptr) *check = status;
  if (status.ok()) {
    EXPECT_EQ(f->function((*args)->tensors(), (*args)->size()), 0);
  }
  return std::move(*args);
}

template <typename T>
std::vector<T> Values(Arguments& args, int index) {
  const DLTensor& t = args.tensors()[index];
  const T* p = static_cast<const T*>(t.data);
  return std::vector<T>(p, p + kprof_num_elements(&t));
}

TEST(BuiltinModule, ListsItsKernels) {
  EXPECT_THAT(BuiltinModule().functions(),
              ElementsAre("copy", "fill", "matmul", "nop", "saxpy", "sleep_us", "spin_us"));
  EXPECT_THAT(BuiltinModule().GetFunction("gemm"),
              StatusIs(absl::StatusCode::kNotFound,
                       "module holds no function 'gemm' (it exports: copy, fill, matmul, nop, "
                       "saxpy, sleep_us, spin_us)"));
}

TEST(BuiltinModule, KernelsComputeWhatTheySay) {
  auto matmul =
      CallBuiltin("matmul", {"float32[2,3]", "float32[2,4]:ones", "float32[4,3]:fill:0.5"});
  EXPECT_THAT(Values<float>(*matmul, 0), Each(2.0f));
  auto saxpy = CallBuiltin("saxpy", {"float32[3]:ones", "float32[3]:arange", "float32:2"});
  EXPECT_THAT(Values<float>(*saxpy, 0), ElementsAre(1.0f, 3.0f, 5.0f));
  auto copy = CallBuiltin("copy", {"int32[3]", "int32[3]:arange"});
  EXPECT_THAT(Values<int32_t>(*copy, 0), ElementsAre(0, 1, 2));
  auto fill = CallBuiltin("fill", {"float64[2]", "float64:1.25"});
  EXPECT_THAT(Values<double>(*fill, 0), ElementsAre(1.25, 1.25));
  auto fill_int = CallBuiltin("fill", {"int64[2]", "float64:-3"});
  EXPECT_THAT(Values<int64_t>(*fill_int, 0), ElementsAre(-3, -3));
  CallBuiltin("spin_us", {"float64:10"});
  CallBuiltin("sleep_us", {"float64:10"});
}

TEST(BuiltinModule, WrongArgumentsAreInvalidArgumentSayingWhatIsTaken) {
  absl::Status check;
  CallBuiltin("matmul", {"float32[2,3]", "float32[2,4]", "float32[5,3]"}, &check);
  EXPECT_THAT(check,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "builtin 'matmul' takes float32 C[m, n], A[m, k], B[k, n] (C = A × B)"));
  CallBuiltin("spin_us", {"float32:10"}, &check);
  EXPECT_THAT(check,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes one float64 scalar")));
  CallBuiltin("saxpy", {"float32[3]", "float32[4]", "float32:1"}, &check);
  EXPECT_THAT(check, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("builtin 'saxpy'")));
  CallBuiltin("copy", {"int32[3]", "int32[4]"}, &check);
  EXPECT_THAT(check, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("same size")));
  CallBuiltin("fill", {"uint8[3]", "float64:1"}, &check);
  EXPECT_THAT(check, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("builtin 'fill'")));
}

TEST(BuiltinModule, KernelsCalledWithoutTheCheckReturnAnErrorCode) {
  auto matmul = BuiltinModule().GetFunction("matmul");
  ASSERT_THAT(matmul, IsOk());
  EXPECT_NE(matmul->function(nullptr, 0), 0);
  auto spin = BuiltinModule().GetFunction("spin_us");
  EXPECT_NE(spin->function(nullptr, 0), 0);
}

}  // namespace
}  // namespace kprof::core

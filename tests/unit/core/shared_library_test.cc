#include "core/modules/shared_library.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "core/args/arguments.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr Device kCpu{DeviceType::kCpu, 0};

std::vector<ArgSpec> Specs(const std::vector<std::string>& texts) {
  std::vector<ArgSpec> specs;
  for (const auto& t : texts) specs.push_back(*ParseArgSpec(t));
  return specs;
}

TEST(SharedLibraryModule, LoadsAndCallsAFunction) {
  auto module = SharedLibraryModule::OpenFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT((*module)->functions(), ElementsAre("vadd"));
  auto vadd = (*module)->GetFunction("vadd");
  ASSERT_THAT(vadd, IsOk());
  EXPECT_EQ(vadd->name, "vadd");
  EXPECT_FALSE(vadd->check_arguments);

  auto args = Arguments::Allocate(
      Specs({"float32[4]:arange", "float32[4]:fill:0.5", "float32[4]:zeros"}), 0, kCpu);
  ASSERT_THAT(args, IsOk());
  ASSERT_EQ(vadd->function((*args)->tensors(), (*args)->size()), 0);
  const float* c = static_cast<const float*>((*args)->tensors()[2].data);
  EXPECT_THAT(std::vector<float>(c, c + 4), ElementsAre(0.5f, 1.5f, 2.5f, 3.5f));
}

TEST(SharedLibraryModule, UnknownFunctionIsNotFoundListingExports) {
  auto module = SharedLibraryModule::OpenFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT(
      (*module)->GetFunction("vsub"),
      StatusIs(absl::StatusCode::kNotFound, "module holds no function 'vsub' (it exports: vadd)"));

  auto many = SharedLibraryModule::OpenFile(TestModulePath("many_exports"));
  ASSERT_THAT(many, IsOk());
  EXPECT_THAT((*many)->GetFunction("g"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("(it exports: f00, f01, f02, f03, f04, f05, f06, f07, and 4 "
                                 "more)")));
}

TEST(SharedLibraryModule, UndefinedSymbolIsInvalidArgumentWithDlerror) {
  EXPECT_THAT(SharedLibraryModule::OpenFile(TestModulePath("undefined_symbol")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("undefined symbol: kprof_test_symbol_nobody_defines")));
}

TEST(SharedLibraryModule, ModuleExportingNothingIsInvalid) {
  EXPECT_THAT(SharedLibraryModule::OpenFile(TestModulePath("exports_nothing")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exports no functions")));
}

TEST(SharedLibraryModule, MissingFileAndNonElfFile) {
  EXPECT_THAT(SharedLibraryModule::OpenFile("/nonexistent/module.so"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/module.so")));
  char path[] = "/tmp/kprof_text_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "not a module", 12), 12);
  close(fd);
  EXPECT_THAT(SharedLibraryModule::OpenFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an ELF file")));
  unlink(path);
}

TEST(SharedLibraryModule, LoadsFromASealedMemfd) {
  const std::string bytes = ReadFileBytes(TestModulePath("error_code"));
  const int fd = memfd_create("kprof-module", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL), 0);
  auto module = SharedLibraryModule::OpenDescriptor(fd);
  close(fd);
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT((*module)->functions(), ElementsAre("fails", "succeeds"));
  auto fails = (*module)->GetFunction("fails");
  ASSERT_THAT(fails, IsOk());
  EXPECT_EQ(fails->function(nullptr, 0), 7);
}

}  // namespace
}  // namespace kprof::core

#include "core/modules/shared_library.h"

#include <dlfcn.h>
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

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

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
  // Without the descriptor's name, which means nothing to the module's author.
  EXPECT_THAT(
      SharedLibraryModule::OpenFile(TestModulePath("undefined_symbol")),
      StatusIs(absl::StatusCode::kInvalidArgument, ::testing::Not(HasSubstr("/proc/self/fd/"))));
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

// What `candidate` of a loaded candidate module answers: whose code the module runs.
int32_t Candidate(const SharedLibraryModule& module) {
  absl::StatusOr<ModuleFunction> candidate = module.GetFunction("candidate");
  if (!candidate.ok()) return -1;
  return candidate->function(nullptr, 0);
}

// Candidates export the same entry points. Each loaded while the others stay loaded, in an
// interleaved order, each a file opened and closed again (so the next one gets the same
// descriptor number): every module runs its own code.
TEST(SharedLibraryModule, CandidatesSharingEntryPointsEachRunTheirOwnCode) {
  std::vector<std::unique_ptr<SharedLibraryModule>> open;
  std::vector<int32_t> expected;
  for (int k : {3, 1, 6, 2, 5, 4}) {
    auto module = SharedLibraryModule::OpenFile(TestModulePath("candidate_" + std::to_string(k)));
    ASSERT_THAT(module, IsOk()) << "candidate " << k;
    EXPECT_EQ(Candidate(**module), k);
    open.push_back(*std::move(module));
    expected.push_back(k);
  }
  for (const char* other : {"candidate_libm", "candidate_saxpy"}) {
    auto module = SharedLibraryModule::OpenFile(TestModulePath(other));
    ASSERT_THAT(module, IsOk()) << other;
    EXPECT_THAT((*module)->functions(), ::testing::Contains("candidate"));
    open.push_back(*std::move(module));
  }
  EXPECT_EQ(Candidate(*open[6]), 25);
  EXPECT_EQ(Candidate(*open[7]), 35);
  EXPECT_THAT(open[7]->GetFunction("my_saxpy"), IsOk());
  EXPECT_THAT(open[7]->GetFunction("gemm"), StatusIs(absl::StatusCode::kNotFound));
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(Candidate(*open[i]), expected[i]);
}

// The same from sealed memfds, each closed by the caller once the module is loaded.
TEST(SharedLibraryModule, CandidatesFromMemfdsEachRunTheirOwnCode) {
  std::vector<std::unique_ptr<SharedLibraryModule>> open;
  for (int k = 1; k <= 6; ++k) {
    const std::string bytes = ReadFileBytes(TestModulePath("candidate_" + std::to_string(k)));
    const int fd = memfd_create("kprof-module", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    auto module = SharedLibraryModule::OpenDescriptor(fd);
    close(fd);
    ASSERT_THAT(module, IsOk());
    open.push_back(*std::move(module));
  }
  for (int k = 1; k <= 6; ++k) EXPECT_EQ(Candidate(*open[static_cast<size_t>(k - 1)]), k);
}

// A module the loader cannot unload keeps its name after it is closed: a later module never
// gets its image, and it loads again as itself.
TEST(SharedLibraryModule, AnImageThatOutlivesItsModuleIsNeverHandedToAnother) {
  for (int round = 0; round < 3; ++round) {
    {
      auto sticky = SharedLibraryModule::OpenFile(TestModulePath("candidate_nodelete"));
      ASSERT_THAT(sticky, IsOk());
      EXPECT_EQ(Candidate(**sticky), 45);
      // Loaded again, the kept image is taken again, not copied anew: its state goes on.
      EXPECT_EQ((*sticky)->GetFunction("calls")->function(nullptr, 0), round + 1);
    }
    for (int k : {2, 5}) {
      auto module = SharedLibraryModule::OpenFile(TestModulePath("candidate_" + std::to_string(k)));
      ASSERT_THAT(module, IsOk());
      EXPECT_EQ(Candidate(**module), k) << "round " << round;
    }
  }
}

// C++ state of GNU-unique binding is shared by the loader between every module defining it:
// refused at inspection, with the flag that avoids it.
TEST(SharedLibraryModule, GnuUniqueStateIsRefused) {
  EXPECT_THAT(SharedLibraryModule::OpenFile(TestModulePath("gnu_unique")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("defines 1 symbol of GNU-unique binding"),
                                        HasSubstr("-fno-gnu-unique"))));
}

// A module needing another loaded module's SONAME would be linked to that module's code.
TEST(SharedLibraryModule, ADependencyOnAnotherModulesSonameIsRefused) {
  auto provider = SharedLibraryModule::OpenFile(TestModulePath("soname_provider"));
  ASSERT_THAT(provider, IsOk());
  EXPECT_THAT(SharedLibraryModule::OpenFile(TestModulePath("soname_consumer")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("needs 'soname_provider.so', the SONAME of another module")));
  provider->reset();
  // With the provider closed, the name is the host's to resolve again.
  EXPECT_THAT(SharedLibraryModule::OpenFile(TestModulePath("soname_consumer")), IsOk());
}

// Two loads of one file at once are two images, each with its own state.
TEST(SharedLibraryModule, TheSameFileTwiceAtOnceIsTwoImages) {
  auto first = SharedLibraryModule::OpenFile(TestModulePath("candidate_1"));
  auto second = SharedLibraryModule::OpenFile(TestModulePath("candidate_1"));
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  const auto calls = [](const SharedLibraryModule& module) {
    return module.GetFunction("calls")->function(nullptr, 0);
  };
  EXPECT_EQ(calls(**first), 1);
  EXPECT_EQ(calls(**first), 2);
  EXPECT_EQ(calls(**second), 1);
  EXPECT_EQ(Candidate(**second), 1);
}

// A name taken by a load this class did not make (a dlopen of a /proc path whose descriptor was
// then closed) is passed over: the next module still runs its own code.
TEST(SharedLibraryModule, ANameHeldByAForeignLoadIsPassedOver) {
  const int fd = open(TestModulePath("candidate_3").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* foreign = dlopen(("/proc/self/fd/" + std::to_string(fd)).c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(foreign, nullptr) << dlerror();
  close(fd);  // the next descriptor opened gets its number, and the loader still holds its name
  auto module = SharedLibraryModule::OpenFile(TestModulePath("candidate_4"));
  ASSERT_THAT(module, IsOk());
  EXPECT_EQ(Candidate(**module), 4);
  dlclose(foreign);
}

}  // namespace
}  // namespace kprof::core

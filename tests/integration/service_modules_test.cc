// kprofd end to end: modules — uploads, listing, the cache and its journal, eviction and
// uploading again.
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
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

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

}  // namespace
}  // namespace kprof

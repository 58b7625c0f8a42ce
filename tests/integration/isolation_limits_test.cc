// Bounds one client cannot push past: uploads on disk as they arrive and bounded together,
// workers' memory (mappings and scratch files included), exports, token labels, cache shares;
// and workers that never run as root.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/sha256.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "emulation.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "isolation_constants.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "processes.h"
#include "status_matchers.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::kAttackerToken;
using ::kprof::testing::kVictimToken;

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::kResidentMeansHeld;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::ResidentKb;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> UploadFiles(const std::string& cache) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(cache + "/modules")) {
    if (entry.path().filename().string().rfind(".upload-", 0) == 0) {
      found.push_back(entry.path().string());
    }
  }
  return found;
}

// An upload's bytes go to a file in the cache as they arrive, not into the daemon's memory;
// one that then sends nothing for --upload-idle-timeout is dropped, its file with it.
TEST(MemoryBounds, UploadsGoToDiskAsTheyArriveAndIdleOnesAreDropped) {
  TempDir dir;
  Daemon daemon;
  const std::string cache = dir.path() + "/cache";
  ASSERT_TRUE(daemon.Start(cache, {"--upload-idle-timeout", "1s"}));
  auto channel = grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Profiler::NewStub(channel);
  grpc::ClientContext context;
  v1::LoadModuleResponse response;
  auto writer = stub->LoadModule(&context, &response);
  v1::LoadModuleRequest message;
  constexpr int64_t kChunk = 4 << 20, kChunks = 48;  // 192 MiB of a declared 200 MiB
  message.mutable_header()->set_name("slow.so");
  message.mutable_header()->set_size_bytes(200 << 20);
  message.mutable_header()->set_sha256(std::string(64, 'a'));
  ASSERT_TRUE(writer->Write(message));
  const int64_t before = ResidentKb(daemon.pid());
  message.set_chunk(std::string(kChunk, 'k'));
  for (int i = 0; i < kChunks; ++i) ASSERT_TRUE(writer->Write(message));
  // Taken, and on disk: the upload's file grows to what was sent.
  int64_t on_disk = 0;
  for (int i = 0; i < 200 && on_disk < kChunk * kChunks; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto files = UploadFiles(cache);
    on_disk = files.size() == 1 ? static_cast<int64_t>(std::filesystem::file_size(files[0])) : 0;
  }
  EXPECT_EQ(on_disk, kChunk * kChunks);
  // Not in the daemon: within a sweep of the uploads (a quarter of the idle timeout) its resident
  // memory is back within a sixth of the 192 MiB received (what gRPC's buffers freed, given back).
  if (kResidentMeansHeld) {
    int64_t grown = ResidentKb(daemon.pid()) - before;
    for (int i = 0; i < 40 && grown >= (32 << 10); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      grown = ResidentKb(daemon.pid()) - before;
    }
    EXPECT_LT(grown, 32 << 10) << "resident grew by " << grown << " kB";
  }
  // Then nothing for the idle timeout: the upload ends, its file goes.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(status.error_message(), HasSubstr("(--upload-idle-timeout 1s) and was dropped"));
  EXPECT_TRUE(UploadFiles(cache).empty());
  // The daemon serves on, uploads included.
  auto client = client::Client::Connect(daemon.target());
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT((*client)->LoadModuleFile(TestModulePath("vector_add")), IsOk());
}

// The worker's memory limit is a cgroup's where the host has one: shared mappings and files in
// the tmpfs scratch count, which RLIMIT_DATA would not see; the worker over it is ended alone.
TEST(MemoryBounds, SharedMappingsAndScratchFilesCountAgainstTheWorkersLimit) {
  KPROF_SKIP_UNDER_EMULATION("has no cgroups");
  TempDir dir;
  Daemon daemon;
  daemon.set_stderr(dir.path() + "/kprofd.log");
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache", {"--worker-memory-limit", "134217728"}));
  auto client = client::Client::Connect(daemon.target());
  ASSERT_THAT(client, IsOk());
  auto info = (*client)->Info();
  ASSERT_THAT(info, IsOk());
  if (info->isolation().find("memory cgroup v") == std::string::npos) {
    GTEST_SKIP() << "no memory cgroup here: " << info->isolation();
  }
  EXPECT_THAT(info->isolation(), HasSubstr("of 128 MiB per worker"));
  auto attacks = (*client)->LoadModuleFile(TestModulePath("attacks"));
  ASSERT_THAT(attacks, IsOk());
  const auto run = [&](const std::string& function) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(attacks->id());
    request.mutable_call()->set_function(function);
    request.set_number(1);
    request.set_repeat(1);
    return (*client)->TimeEvaluate(request).status();
  };
  EXPECT_THAT(
      run("maps_shared_memory"),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("went over its memory limit of 128 MiB")));
  ASSERT_THAT(run("writes_its_scratch"), IsOk());
  // tmpfs pages are charged to the writer: the write fails or the worker is ended.
  EXPECT_THAT(run("fills_its_scratch"), StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(run("writes_its_scratch"), IsOk());
  EXPECT_EQ(kill(daemon.pid(), 0), 0);
}

// Uploads held open are buffered in the front: all of them together are bounded by bytes (4 x
// --max-module-bytes, reserved by each header's declared size), not only one by one.
TEST(MemoryBounds, UploadsInProgressTogetherAreBoundedInBytes) {
  TempDir dir;
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache", {"--max-module-bytes", "1048576"}));
  auto channel = grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Profiler::NewStub(channel);
  struct Open {
    grpc::ClientContext context;
    v1::LoadModuleResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::LoadModuleRequest>> writer;
  };
  const auto open_upload = [&](Open& upload) {
    upload.writer = stub->LoadModule(&upload.context, &upload.response);
    v1::LoadModuleRequest header;
    header.mutable_header()->set_name("held-open.so");
    header.mutable_header()->set_size_bytes(1 << 20);
    header.mutable_header()->set_sha256(std::string(64, 'a'));
    return upload.writer->Write(header);
  };
  std::vector<std::unique_ptr<Open>> held;
  for (int i = 0; i < 4; ++i) {  // 4 MiB declared: the bound
    held.push_back(std::make_unique<Open>());
    ASSERT_TRUE(open_upload(*held.back()));
  }
  // Wait until the daemon has taken the four headers (an upload it refused would end).
  auto client = client::Client::Connect(daemon.target());
  ASSERT_THAT(client, IsOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Open fifth;
  open_upload(fifth);
  fifth.writer->WritesDone();
  const grpc::Status refused = fifth.writer->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("uploads in progress hold 4194304 bytes; this one's 1048576 would pass "
                        "the limit of 4194304"));
  // One ends: its reservation goes with it, and a real upload fits again.
  held[0]->context.TryCancel();
  (void)held[0]->writer->Finish();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_THAT((*client)->LoadModuleFile(TestModulePath("vector_add")), IsOk());
  for (size_t i = 1; i < held.size(); ++i) held[i]->context.TryCancel();
}

// What GetInfo and ListModules carry is bounded at upload: at most 4096 exported functions. A
// cache that holds such a module from before is repaired at start.
TEST(MemoryBounds, AModuleOfTooManyExportsIsRefusedAndDroppedFromAnOldCache) {
  TempDir dir;
  const std::string bytes = ReadFileBytes(TestModulePath("too_many_exports"));
  ASSERT_FALSE(bytes.empty());
  {
    Daemon daemon;
    ASSERT_TRUE(daemon.Start(dir.path() + "/cache"));
    auto client = client::Client::Connect(daemon.target());
    ASSERT_THAT(client, IsOk());
    EXPECT_THAT((*client)->LoadModule(bytes, "too_many_exports.so").status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("the module exports 4097 functions (limit 4096)")));
  }
  // As an older kprofd would have left it: the bytes under their SHA-256.
  const std::string planted = dir.path() + "/cache/modules/" + base::Sha256Hex(bytes);
  std::ofstream(planted, std::ios::binary) << bytes;
  Daemon daemon;
  daemon.set_stderr(dir.path() + "/log");
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache"));
  EXPECT_FALSE(std::ifstream(planted).good());
  EXPECT_THAT(ReadFileBytes(dir.path() + "/log"),
              HasSubstr("dropping damaged module " + base::Sha256Hex(bytes)));
}

// `kprofd --check-config` on a token file: its exit code and what it printed.
std::pair<int, std::string> CheckTokenFile(const TempDir& dir, const std::string& contents) {
  std::ofstream(dir.path() + "/tokens") << contents;
  const std::string command = std::string(testing::KprofdPath()) + " --token-file " + dir.path() +
                              "/tokens --cache-dir " + dir.path() + "/cache --check-config > " +
                              dir.path() + "/out 2>&1";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFileBytes(dir.path() + "/out")};
}

TEST(TokenLabels, ALabelIsPrintableAndShortOrTheDaemonRefusesToStart) {
  TempDir dir;
  EXPECT_EQ(CheckTokenFile(dir, "# token, label\nabc alice\ndef\nghi  bob the builder\n").first, 0);
  auto [code, out] = CheckTokenFile(dir, "abc alice\ndef bad\x1b[31mlabel\n");
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("line 2: a label may not hold control characters"));
  std::tie(code, out) = CheckTokenFile(dir, "abc " + std::string(65, 'x') + "\n");
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("line 1: the label is 65 bytes; at most 64"));
  std::tie(code, out) = CheckTokenFile(dir, "abc alice\ndef bob\nabc carol\n");
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("line 3: this token is listed already"));
  // sha256("abc") begins ba7816bf: a label spelling it would merge two clients.
  std::tie(code, out) = CheckTokenFile(dir, "abc\ndef ba7816bf\n");
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("the label 'ba7816bf' is also the label of a token without one"));
}

// The cache is shared fairly: one client's uploads evict its own modules, and another's only
// where that one holds more than its share; a client within its share keeps what it holds.
TEST(CacheShare, OneClientsUploadsNeverEvictAnotherWithinItsShare) {
  TempDir dir;
  std::ofstream(dir.path() + "/tokens") << kAttackerToken << "\n" << kVictimToken << "\n";
  const int64_t size =
      static_cast<int64_t>(std::filesystem::file_size(TestModulePath("candidate_1")));
  ASSERT_EQ(std::filesystem::file_size(TestModulePath("candidate_4")),
            static_cast<uintmax_t>(size));
  Daemon daemon;
  daemon.set_stderr(dir.path() + "/kprofd.log");
  // Room for four and a half candidates: a share of 2.25 each for two clients.
  ASSERT_TRUE(daemon.Start(
      dir.path() + "/cache",
      {"--token-file", dir.path() + "/tokens", "--max-cache-bytes", std::to_string(size * 9 / 2)}));
  const auto connect = [&](const char* token) {
    client::ClientOptions options;
    options.bearer_token = token;
    auto connected = client::Client::Connect(daemon.target(), options);
    EXPECT_THAT(connected, IsOk());
    return connected.ok() ? *std::move(connected) : nullptr;
  };
  auto victim = connect(kVictimToken);
  auto flooder = connect(kAttackerToken);
  auto kept = victim->LoadModuleFile(TestModulePath("candidate_1"));  // the oldest
  ASSERT_THAT(kept, IsOk());
  std::vector<std::string> flooded;
  for (int k = 2; k <= 6; ++k) {
    auto loaded = flooder->LoadModuleFile(TestModulePath("candidate_" + std::to_string(k)));
    ASSERT_THAT(loaded, IsOk()) << k;
    flooded.push_back(loaded->id());
  }
  // The victim's module stayed; the flooder's own oldest went to make room for its newest.
  auto has = victim->HasModule(kept->id());
  ASSERT_THAT(has, IsOk());
  EXPECT_TRUE(*has) << ReadFileBytes(dir.path() + "/kprofd.log");
  auto newest = flooder->HasModule(flooded.back());
  ASSERT_THAT(newest, IsOk());
  EXPECT_TRUE(*newest);
  auto oldest = flooder->HasModule(flooded.front());
  ASSERT_THAT(oldest, IsOk());
  EXPECT_FALSE(*oldest);
  // Within its own share (two modules), the victim's next upload takes room from the flooder,
  // who is over its share, rather than from the victim's own older module.
  EXPECT_THAT(victim->LoadModuleFile(TestModulePath("candidate_saxpy")), IsOk());
  has = victim->HasModule(kept->id());
  ASSERT_THAT(has, IsOk());
  EXPECT_TRUE(*has);
}

// `kprofd --check-config` with `options`: its exit code and what it printed.
std::pair<int, std::string> CheckConfig(const TempDir& dir, const std::string& options) {
  const std::string command = std::string(testing::KprofdPath()) + " --cache-dir " + dir.path() +
                              "/cache " + options + " --check-config > " + dir.path() + "/out 2>&1";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFileBytes(dir.path() + "/out")};
}

// A root daemon's workers become another user: never root, and one that exists.
TEST(WorkerUser, IsNeverRootAndIsAUserOfThisHost) {
  TempDir dir;
  if (geteuid() != 0) {
    auto [code, out] = CheckConfig(dir, "--worker-user nobody");
    EXPECT_NE(code, 0);
    EXPECT_THAT(out, HasSubstr("--worker-user needs kprofd to start as root"));
    return;
  }
  EXPECT_EQ(CheckConfig(dir, "--worker-user nobody").first, 0);
  EXPECT_EQ(CheckConfig(dir, "--worker-user 4242:4242").first, 0);
  for (const char* root : {"root", "0", "4242:0"}) {
    auto [code, out] = CheckConfig(dir, std::string("--worker-user ") + root);
    EXPECT_NE(code, 0) << root;
    EXPECT_THAT(out, HasSubstr("workers never run as root")) << root;
  }
  auto [code, out] = CheckConfig(dir, "--worker-user no-such-user-here");
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("'no-such-user-here' is neither a user of this host nor UID[:GID]"));
  // A scratch directory the workers' user cannot reach is refused at start, naming why.
  Daemon daemon;
  daemon.set_stderr(dir.path() + "/kprofd.log");
  ASSERT_EQ(chmod(dir.path().c_str(), 0700), 0);
  EXPECT_FALSE(daemon.Start(dir.path() + "/cache",
                            {"--scratch-dir", dir.path(), "--worker-user", "nobody"}));
  EXPECT_THAT(ReadFileBytes(dir.path() + "/kprofd.log"),
              HasSubstr("is out of the workers' reach: uid 65534 may not search '" + dir.path() +
                        "' (mode 0700)"));
}

}  // namespace
}  // namespace kprof

// Modules and batches: sent on the stream before their jobs or refused with the reason, unknown
// ones, evicted ones sent again, queued jobs that keep theirs.
#include <signal.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "batch_fixture.h"
#include "cli.h"
#include "client/farm.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "processes.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A module may travel on the stream with its jobs (BatchRequest.modules): stored as an upload
// would be, before the message's jobs are taken, and held by the stream's client. One that does
// not match what it declares, or is over 4 MiB, is refused: the jobs naming it fail with the
// reason, and run once the module is uploaded.
TEST_F(BatchTest, ModulesSentOnTheStreamAreStoredBeforeTheirJobsOrRefusedWithTheReason) {
  const std::string three = ::kprof::testing::ReadFileBytes(TestModulePath("candidate_3"));
  const std::string five = ::kprof::testing::ReadFileBytes(TestModulePath("candidate_5"));
  const auto inline_module = [](const std::string& bytes) {
    v1::InlineModule module;
    module.mutable_header()->set_name("cand.so");
    module.mutable_header()->set_size_bytes(bytes.size());
    module.mutable_header()->set_sha256(client::ModuleId(bytes));
    module.set_bytes(bytes);
    return module;
  };
  const auto job = [](const std::string& id, const std::string& module) {
    return OnceJob(id, module, "candidate");
  };
  v1::BatchRequest request;
  *request.add_modules() = inline_module(three);
  *request.add_jobs() = job("three", client::ModuleId(three));
  // Declares another module's hash.
  v1::InlineModule lying = inline_module(five);
  lying.mutable_header()->set_sha256(std::string(64, 'a'));
  *request.add_modules() = lying;
  *request.add_jobs() = job("lying", std::string(64, 'a'));
  // Declares another size.
  v1::InlineModule short_size = inline_module(five);
  short_size.mutable_header()->set_size_bytes(five.size() - 1);
  *request.add_modules() = short_size;
  *request.add_jobs() = job("size", client::ModuleId(five));
  // Over 4 MiB (the loader ignores what follows the last section).
  const std::string big = five + std::string((4 << 20) + 1 - five.size(), '\0');
  *request.add_modules() = inline_module(big);
  *request.add_jobs() = job("big", client::ModuleId(big));

  auto stub = v1::Profiler::NewStub(
      grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->MeasureBatch(&context);
  ASSERT_TRUE(stream->Write(request));
  std::map<std::string, v1::BatchUpdate> finals;
  const auto read_finals = [&](size_t count) {
    v1::BatchUpdate update;
    while (finals.size() < count && stream->Read(&update)) {
      std::vector<v1::BatchUpdate> all = {update};
      all.insert(all.end(), update.more().begin(), update.more().end());
      for (const v1::BatchUpdate& u : all) {
        if (u.state() == v1::BatchUpdate::DONE || u.state() == v1::BatchUpdate::FAILED) {
          finals[u.id()] = u;
        }
      }
    }
  };
  read_finals(4);
  ASSERT_EQ(finals.size(), 4u);
  // Its own code ran: candidate_3's `candidate` returns 3.
  EXPECT_EQ(finals.at("three").state(), v1::BatchUpdate::FAILED);
  EXPECT_THAT(finals.at("three").message(), HasSubstr("returned 3"));
  EXPECT_EQ(finals.at("lying").code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(finals.at("lying").message(),
              AllOf(HasSubstr("sent on the stream was refused"), HasSubstr("SHA-256")));
  EXPECT_EQ(finals.at("size").code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(finals.at("size").message(),
              HasSubstr("declares " + std::to_string(five.size() - 1) + " bytes and carries " +
                        std::to_string(five.size())));
  EXPECT_EQ(finals.at("big").code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(finals.at("big").message(),
              AllOf(HasSubstr("at most 4194304"), HasSubstr("LoadModule")));
  // The stream's client holds the module it sent, as if uploaded.
  auto held = client_->ListModules();
  ASSERT_THAT(held, IsOk());
  EXPECT_TRUE(std::any_of(held->begin(), held->end(), [&](const v1::ModuleInfo& m) {
    return m.id() == client::ModuleId(three);
  }));
  // Uploaded after all, the refused one runs when its job comes again.
  ASSERT_THAT(client_->LoadModule(five, "five.so"), IsOk());
  v1::BatchRequest again;
  *again.add_jobs() = job("size", client::ModuleId(five));
  ASSERT_TRUE(stream->Write(again));
  finals.clear();
  read_finals(1);
  ASSERT_EQ(finals.count("size"), 1u);
  EXPECT_THAT(finals.at("size").message(), HasSubstr("returned 5"));
  stream->WritesDone();
  v1::BatchUpdate rest;
  while (stream->Read(&rest)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

// A job whose module the daemon does not hold fails NOT_FOUND, and may come again under its id
// once the module is uploaded (as a farm does after an eviction).
TEST_F(BatchTest, AJobRefusedForAnUnknownModuleMayComeAgain) {
  const std::string bytes = ::kprof::testing::ReadFileBytes(TestModulePath("vector_add"));
  const std::string id = client::ModuleId(bytes);
  auto channel = grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Profiler::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->MeasureBatch(&context);
  v1::BatchRequest request;
  v1::BatchJob job;
  job.set_id("again");
  v1::FunctionCall* call = job.mutable_time_evaluate()->mutable_call();
  call->set_module_id(id);
  call->set_function("vadd");
  for (const char* a : {"float32[4]", "float32[4]:ones", "float32[4]:ones"}) call->add_args(a);
  *request.add_jobs() = job;
  ASSERT_TRUE(stream->Write(request));
  v1::BatchUpdate update;
  bool failed = false;
  while (!failed && stream->Read(&update)) failed = update.state() == v1::BatchUpdate::FAILED;
  ASSERT_TRUE(failed);
  EXPECT_EQ(update.code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_THAT(update.message(), HasSubstr("unknown module " + id));
  ASSERT_THAT(client_->LoadModule(bytes, "vector_add.so"), IsOk());
  ASSERT_TRUE(stream->Write(request));
  bool done = false;
  while (!done && stream->Read(&update)) done = update.state() == v1::BatchUpdate::DONE;
  EXPECT_TRUE(done) << update.message();
  stream->WritesDone();
  while (stream->Read(&update)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

// The client sends again, on the same stream, a job whose module the daemon no longer holds,
// once it has uploaded the module again.
TEST_F(BatchTest, TheClientSendsAgainAJobWhoseModuleWasEvicted) {
  auto module = client_->LoadModuleFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  ASSERT_THAT(client_->UnloadModule(module->id()), IsOk());
  v1::BatchJob vadd;
  vadd.set_id("evicted");
  v1::FunctionCall* call = vadd.mutable_time_evaluate()->mutable_call();
  call->set_module_id(module->id());
  call->set_function("vadd");
  for (const char* a : {"float32[4]", "float32[4]:ones", "float32[4]:ones"}) call->add_args(a);
  absl::Status status;
  const auto updates = Run({vadd, Spin("spin")}, &status);
  ASSERT_THAT(status, IsOk());
  for (const char* id : {"evicted", "spin"}) {
    ASSERT_EQ(updates.count(id), 1u) << id;
    EXPECT_EQ(Finals(updates.at(id)), 1) << id;
    EXPECT_EQ(updates.at(id).back().state(), v1::BatchUpdate::DONE)
        << id << ": " << updates.at(id).back().message();
  }
  EXPECT_THAT(client_->HasModule(module->id()), IsOkAndHolds(true));
}

// A job waiting in its stream keeps its module: it can be neither unloaded nor evicted.
TEST_F(BatchTest, QueuedJobsKeepTheirModule) {
  auto module = client_->LoadModuleFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  auto channel = grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Profiler::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->MeasureBatch(&context);
  v1::BatchRequest request;
  // Two long jobs fill the stream's places in the device queue; the third waits in the stream.
  for (const char* id : {"long1", "long2"}) {
    *request.add_jobs() = BuiltinJob(id, "sleep_us", "float64:300000");
  }
  v1::BatchJob vadd;
  vadd.set_id("vadd");
  v1::FunctionCall* call = vadd.mutable_time_evaluate()->mutable_call();
  call->set_module_id(module->id());
  call->set_function("vadd");
  for (const char* a : {"float32[4]", "float32[4]:ones", "float32[4]:ones"}) call->add_args(a);
  *request.add_jobs() = vadd;
  ASSERT_TRUE(stream->Write(request));
  v1::BatchUpdate update;
  bool queued = false;
  while (!queued && stream->Read(&update)) {
    queued = update.id() == "vadd" && update.state() == v1::BatchUpdate::QUEUED;
  }
  ASSERT_TRUE(queued);
  EXPECT_THAT(client_->UnloadModule(module->id()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("in use")));
  stream->WritesDone();
  std::map<std::string, v1::BatchUpdate> last;
  while (stream->Read(&update)) last[update.id()] = update;
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(last["vadd"].state(), v1::BatchUpdate::DONE) << last["vadd"].message();
}

}  // namespace
}  // namespace kprof

// MeasureBatch through a real kprofd: thousands of jobs on one stream, each answered exactly
// once, failures among them, progress, a crash, a client that goes away; and `kprof batch`.
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

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::kResidentMeansHeld;
using ::kprof::testing::ResidentKb;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// A TimeEvaluate job of a builtin function with one argument.
v1::BatchJob BuiltinJob(const std::string& id, const std::string& function,
                        const std::string& arg) {
  v1::BatchJob job;
  job.set_id(id);
  v1::TimeEvaluateRequest* r = job.mutable_time_evaluate();
  r->mutable_call()->set_module_id("builtin");
  r->mutable_call()->set_function(function);
  r->mutable_call()->add_args(arg);
  return job;
}

// One call of `function` in `module`, repeated once: what a tuner's candidate job is.
v1::BatchJob OnceJob(const std::string& id, const std::string& module,
                     const std::string& function) {
  v1::BatchJob job;
  job.set_id(id);
  job.mutable_time_evaluate()->mutable_call()->set_module_id(module);
  job.mutable_time_evaluate()->mutable_call()->set_function(function);
  job.mutable_time_evaluate()->set_number(1);
  job.mutable_time_evaluate()->set_repeat(1);
  return job;
}

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache"));
    auto connected = client::Client::Connect(daemon_.target());
    ASSERT_THAT(connected, IsOk());
    client_ = std::move(*connected);
  }

  static v1::BatchJob Spin(const std::string& id, const std::string& function = "spin_us") {
    v1::BatchJob job = BuiltinJob(id, function, "float64:5");
    job.mutable_time_evaluate()->set_repeat(2);
    return job;
  }

  // Runs `jobs`; every update by id, in the order they came.
  std::map<std::string, std::vector<v1::BatchUpdate>> Run(const std::vector<v1::BatchJob>& jobs,
                                                          absl::Status* status) {
    std::map<std::string, std::vector<v1::BatchUpdate>> updates;
    *status = client_->MeasureBatch(jobs, [&](const v1::BatchUpdate& u) {
      updates[u.id()].push_back(u);
      last_ = u;
    });
    return updates;
  }

  static int Finals(const std::vector<v1::BatchUpdate>& updates) {
    int n = 0;
    for (const auto& u : updates) {
      n += u.state() == v1::BatchUpdate::DONE || u.state() == v1::BatchUpdate::FAILED;
    }
    return n;
  }

  TempDir dir_;
  Daemon daemon_;
  std::unique_ptr<client::Client> client_;
  v1::BatchUpdate last_;
};

TEST_F(BatchTest, ThousandsOfJobsEachAnsweredOnceWithFailuresAmongThem) {
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 2000; ++i) {
    if (i % 100 == 7) {
      jobs.push_back(Spin("j" + std::to_string(i), "no_such_function"));
    } else {
      jobs.push_back(Spin("j" + std::to_string(i)));
    }
  }
  v1::BatchJob bad_device = Spin("on-tpu");
  bad_device.mutable_time_evaluate()->set_device("tpu:0");
  jobs.push_back(bad_device);
  absl::Status status;
  const auto updates = Run(jobs, &status);
  ASSERT_THAT(status, IsOk());
  int done = 0, failed = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = "j" + std::to_string(i);
    ASSERT_EQ(updates.count(id), 1u) << id;
    const std::vector<v1::BatchUpdate>& u = updates.at(id);
    ASSERT_EQ(Finals(u), 1) << id;
    const v1::BatchUpdate& last = u.back();
    if (i % 100 == 7) {
      EXPECT_EQ(last.state(), v1::BatchUpdate::FAILED) << id;
      EXPECT_EQ(last.code(), static_cast<int>(absl::StatusCode::kNotFound));
      EXPECT_THAT(last.message(), HasSubstr("no_such_function"));
      ++failed;
    } else {
      ASSERT_EQ(last.state(), v1::BatchUpdate::DONE) << id << ": " << last.message();
      EXPECT_EQ(last.time_evaluate().seconds_per_call_size(), 2);
      EXPECT_GT(last.time_evaluate().statistics().mean(), 4e-6);
      // QUEUED, RUNNING, DONE in that order.
      ASSERT_EQ(u.size(), 3u) << id;
      EXPECT_EQ(u[0].state(), v1::BatchUpdate::QUEUED);
      EXPECT_EQ(u[1].state(), v1::BatchUpdate::RUNNING);
      ++done;
    }
  }
  EXPECT_EQ(updates.at("on-tpu").back().state(), v1::BatchUpdate::FAILED);
  EXPECT_THAT(updates.at("on-tpu").back().message(), HasSubstr("tpu"));
  // The last update's progress counts everything.
  EXPECT_EQ(last_.progress().done(), done);
  EXPECT_EQ(last_.progress().failed(), failed + 1);
  EXPECT_EQ(last_.progress().queued(), 0);
  EXPECT_EQ(last_.progress().running(), 0);
}

// Jobs go to a worker without their modules' files once it has them open; it keeps 64 open.
// Round after round over 70 modules with one entry point, pipelined, the worker closes some
// before the front has heard of it: such a job comes back unrun and goes again with its file.
// Every job runs its own module's code once, and is told QUEUED, RUNNING and its end once each.
TEST_F(BatchTest, JobsOverMoreModulesThanAWorkerKeepsOpenEachRunTheirOwnOnce) {
  constexpr int kModules = 70;
  std::vector<std::string> families;
  for (int k = 1; k <= 6; ++k) {
    families.push_back(
        ::kprof::testing::ReadFileBytes(TestModulePath("candidate_" + std::to_string(k))));
  }
  std::vector<std::string> ids;
  for (int i = 0; i < kModules; ++i) {
    // Distinct bytes (the loader ignores what follows the file's last section), K = i % 6 + 1.
    auto loaded = client_->LoadModule(families[i % 6] + absl::StrCat("-round-", i), "cand.so");
    ASSERT_THAT(loaded, IsOk());
    ids.push_back(loaded->id());
  }
  std::vector<v1::BatchJob> jobs;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kModules; ++i) {
      jobs.push_back(
          OnceJob(absl::StrCat(round, "/", i), ids[static_cast<size_t>(i)], "candidate"));
    }
  }
  absl::Status status;
  const auto updates = Run(jobs, &status);
  ASSERT_THAT(status, IsOk());
  for (const v1::BatchJob& job : jobs) {
    ASSERT_EQ(updates.count(job.id()), 1u) << job.id();
    const std::vector<v1::BatchUpdate>& u = updates.at(job.id());
    ASSERT_EQ(u.size(), 3u) << job.id();
    EXPECT_EQ(u[0].state(), v1::BatchUpdate::QUEUED) << job.id();
    EXPECT_EQ(u[1].state(), v1::BatchUpdate::RUNNING) << job.id();
    EXPECT_EQ(u[2].state(), v1::BatchUpdate::FAILED) << job.id();
    const int i = std::stoi(job.id().substr(job.id().find('/') + 1));
    EXPECT_THAT(u[2].message(), HasSubstr(absl::StrCat("returned ", i % 6 + 1))) << job.id();
  }
}

// Runs `jobs` on a stream of its own asking up to 1024 updates a message; each message with the
// time it came (since the stream began), and its updates.
struct Message {
  double seconds = 0;
  std::vector<v1::BatchUpdate> updates;
};
std::vector<Message> RawBatch(const std::string& target, const std::vector<v1::BatchJob>& jobs) {
  auto stub =
      v1::Profiler::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->MeasureBatch(&context);
  v1::BatchRequest request;
  request.set_updates_per_message(1024);
  for (const v1::BatchJob& job : jobs) *request.add_jobs() = job;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(stream->Write(request));
  stream->WritesDone();
  std::vector<Message> messages;
  v1::BatchUpdate update;
  while (stream->Read(&update)) {
    Message& m = messages.emplace_back();
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (v1::BatchUpdate& more : *update.mutable_more()) m.updates.push_back(std::move(more));
    update.clear_more();
    m.updates.insert(m.updates.begin(), update);
  }
  EXPECT_TRUE(stream->Finish().ok());
  return messages;
}

// While jobs of a stream wait for the device, the updates of short ones travel together,
// dozens to a message, not one or two each.
TEST_F(BatchTest, UpdatesOfShortJobsShareMessages) {
  RawBatch(daemon_.target(), {Spin("warm")});  // the worker starts
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 2000; ++i) {
    v1::BatchJob job = BuiltinJob("n" + std::to_string(i), "nop", "float64:0");
    job.mutable_time_evaluate()->mutable_call()->clear_args();
    job.mutable_time_evaluate()->set_number(1);
    job.mutable_time_evaluate()->set_repeat(1);
    jobs.push_back(job);
  }
  const std::vector<Message> messages = RawBatch(daemon_.target(), jobs);
  size_t updates = 0, done = 0;
  for (const Message& m : messages) {
    updates += m.updates.size();
    for (const v1::BatchUpdate& u : m.updates) done += u.state() == v1::BatchUpdate::DONE;
  }
  EXPECT_EQ(done, jobs.size());
  EXPECT_EQ(updates, 3 * jobs.size());  // QUEUED, RUNNING, DONE each
  // A message once 64 updates are ready, or once the first waited a millisecond; at once for the
  // last 16 jobs' (no job waits behind them): at most so many, however fast the jobs ran here.
  // Without waiting for company, some 280 messages in 95 ms (as the writes in flight allowed);
  // with it, about 85.
  ASSERT_FALSE(messages.empty());
  const double milliseconds = (messages.back().seconds - messages.front().seconds) * 1e3;
  const double most = static_cast<double>(updates) / 64 + milliseconds + 2 * 16 + 2;
  EXPECT_LE(static_cast<double>(messages.size()), most)
      << updates << " updates in " << milliseconds << " ms";
}

// Updates wait for company only briefly: behind a job of 400 ms, the updates of the short jobs
// before it go out long before it ends (at most a millisecond after they were ready), though
// more jobs wait behind it.
TEST_F(BatchTest, UpdatesHeldForCompanyGoOutWithinAMillisecond) {
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(Spin("before" + std::to_string(i)));
  v1::BatchJob slow = BuiltinJob("slow", "spin_us", "float64:400000");
  slow.mutable_time_evaluate()->set_number(1);
  slow.mutable_time_evaluate()->set_repeat(1);
  jobs.push_back(slow);
  // More behind it than go to the device at once (16): they wait in the stream.
  for (int i = 0; i < 40; ++i) jobs.push_back(Spin("after" + std::to_string(i)));
  const std::vector<Message> messages = RawBatch(daemon_.target(), jobs);
  std::map<std::string, double> done_at;
  for (const Message& m : messages) {
    for (const v1::BatchUpdate& u : m.updates) {
      if (u.state() == v1::BatchUpdate::DONE) done_at[u.id()] = m.seconds;
    }
  }
  ASSERT_EQ(done_at.size(), jobs.size());
  for (int i = 0; i < 5; ++i) {
    // The slow job spins 400 ms after them; a millisecond's hold leaves nearly all of it.
    EXPECT_LT(done_at.at("before" + std::to_string(i)), done_at.at("slow") - 0.2) << i;
  }
}

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

// An id that is missing, too long or used twice would make answers ambiguous: the stream ends
// INVALID_ARGUMENT naming it, and the daemon goes on serving.
// A job whose options the worker would refuse is refused when the stream takes it, before it
// waits behind the others: its FAILED comes ahead of the long job's DONE, and never QUEUED.
TEST_F(BatchTest, BadOptionsAreRefusedWhenTheStreamTakesTheJob) {
  v1::BatchJob slow = BuiltinJob("slow", "spin_us", "float64:1500000");
  slow.mutable_time_evaluate()->set_repeat(1);
  v1::BatchJob zero = Spin("zero-repeats");
  zero.mutable_time_evaluate()->set_repeat(0);
  v1::BatchJob spec = BuiltinJob("bad-spec", "spin_us", "float33:1");
  v1::BatchJob filter = Spin("bad-filter");
  filter.mutable_time_evaluate()->set_outlier_filter("tukey");
  absl::Status status;
  const auto updates = Run({slow, zero, spec, filter}, &status);
  ASSERT_THAT(status, IsOk());
  for (const char* id : {"zero-repeats", "bad-spec", "bad-filter"}) {
    const std::vector<v1::BatchUpdate>& said = updates.at(id);
    ASSERT_EQ(said.size(), 1u) << id;  // FAILED alone: never queued
    EXPECT_EQ(said[0].state(), v1::BatchUpdate::FAILED) << id;
    EXPECT_EQ(said[0].code(), static_cast<int>(absl::StatusCode::kInvalidArgument)) << id;
  }
  EXPECT_THAT(updates.at("zero-repeats")[0].message(), HasSubstr("repeat = 0 is out of range"));
  EXPECT_THAT(updates.at("bad-spec")[0].message(), HasSubstr("float33"));
  EXPECT_THAT(updates.at("bad-filter")[0].message(), HasSubstr("unknown outlier filter 'tukey'"));
  // The long job's answer came last.
  EXPECT_EQ(last_.id(), "slow");
  EXPECT_EQ(last_.state(), v1::BatchUpdate::DONE);
}

TEST_F(BatchTest, AmbiguousIdsEndTheStream) {
  for (const std::string& bad : {std::string(), std::string(300, 'x'), std::string("twice")}) {
    std::vector<v1::BatchJob> jobs = {Spin("twice"), Spin(bad)};
    absl::Status status;
    Run(jobs, &status);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr(bad == "twice" ? "used twice" : "id is")));
  }
  absl::Status status;
  const auto updates = Run({Spin("fine")}, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(updates.at("fine").back().state(), v1::BatchUpdate::DONE);
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

// A daemon shutting down ends open batch streams UNAVAILABLE once what they hold is answered.
TEST_F(BatchTest, ShutdownEndsOpenStreamsAfterAnsweringThem) {
  auto channel = grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Profiler::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->MeasureBatch(&context);
  v1::BatchRequest request;
  *request.add_jobs() = Spin("held");
  ASSERT_TRUE(stream->Write(request));
  v1::BatchUpdate update;
  bool done = false;
  while (!done && stream->Read(&update)) done = update.state() == v1::BatchUpdate::DONE;
  ASSERT_TRUE(done);
  // The client keeps the stream open; the daemon is told to stop.
  kill(daemon_.pid(), SIGTERM);
  while (stream->Read(&update)) {
  }
  const grpc::Status finished = stream->Finish();
  EXPECT_EQ(finished.error_code(), grpc::StatusCode::UNAVAILABLE) << finished.error_message();
  EXPECT_THAT(finished.error_message(), HasSubstr("shutting down"));
  EXPECT_EQ(daemon_.Stop(), 0);
}

// A job's queue wait runs from when the daemon received it: twelve 40 ms jobs on one stream,
// the last waits for the eleven before it, not only for the one ahead of it in the device queue.
TEST_F(BatchTest, QueueWaitCountsTheTimeInTheStream) {
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 12; ++i) {
    v1::BatchJob job = BuiltinJob("s" + std::to_string(i), "sleep_us", "float64:40000");
    job.mutable_time_evaluate()->set_repeat(1);
    jobs.push_back(job);
  }
  absl::Status status;
  const auto updates = Run(jobs, &status);
  ASSERT_THAT(status, IsOk());
  double longest_wait = 0, executions = 0, longest_execution = 0;
  for (const v1::BatchJob& job : jobs) {
    const v1::BatchUpdate& last = updates.at(job.id()).back();
    ASSERT_EQ(last.state(), v1::BatchUpdate::DONE) << job.id() << ": " << last.message();
    const v1::JobTiming& timing = last.time_evaluate().timing();
    EXPECT_GE(timing.execution_seconds(), 0.04) << job.id();
    longest_wait = std::max(longest_wait, timing.queue_wait_seconds());
    executions += timing.execution_seconds();
    longest_execution = std::max(longest_execution, timing.execution_seconds());
  }
  // All were received at once, so the last to run waited for every other one.
  EXPECT_GE(longest_wait, 0.9 * (executions - longest_execution));
  EXPECT_GE(longest_wait, 0.4);
}

TEST_F(BatchTest, ACrashFailsItsJobOnly) {
  auto faults = client_->LoadModuleFile(TestModulePath("faults"));
  ASSERT_THAT(faults, IsOk());
  std::vector<v1::BatchJob> jobs = {Spin("before")};
  v1::BatchJob crash;
  crash.set_id("crash");
  crash.mutable_time_evaluate()->mutable_call()->set_module_id(faults->id());
  crash.mutable_time_evaluate()->mutable_call()->set_function("segfault");
  jobs.push_back(crash);
  jobs.push_back(Spin("after"));
  absl::Status status;
  const auto updates = Run(jobs, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(updates.at("before").back().state(), v1::BatchUpdate::DONE);
  EXPECT_EQ(updates.at("after").back().state(), v1::BatchUpdate::DONE);
  EXPECT_EQ(updates.at("crash").back().state(), v1::BatchUpdate::FAILED);
  EXPECT_EQ(updates.at("crash").back().code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_THAT(updates.at("crash").back().message(), HasSubstr("SIGSEGV"));
}

// A client that goes away mid-batch: its jobs stop, and the daemon serves the next client.
TEST_F(BatchTest, AClientGoingAwayMidBatchLeavesTheDaemonServing) {
  auto channel = grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Profiler::NewStub(channel);
  for (int round = 0; round < 3; ++round) {
    grpc::ClientContext context;
    auto stream = stub->MeasureBatch(&context);
    v1::BatchRequest request;
    for (int i = 0; i < 500; ++i) *request.add_jobs() = Spin("x" + std::to_string(i));
    ASSERT_TRUE(stream->Write(request));
    v1::BatchUpdate update;
    ASSERT_TRUE(stream->Read(&update));  // underway
    context.TryCancel();
    while (stream->Read(&update)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  absl::Status status;
  const auto updates = Run({Spin("after")}, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(updates.at("after").back().state(), v1::BatchUpdate::DONE);
}

// A client that does not read its updates holds up its own stream, not the daemon's memory:
// past a bound in bytes of unread results, no further job of the stream goes to a device.
// Every job is still answered once the client reads.
TEST_F(BatchTest, AClientThatDoesNotReadStallsItsStreamNotTheDaemonsMemory) {
  auto channel = grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Profiler::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->MeasureBatch(&context);
  // Each result some 1.1 MB: 66 MB if all were held, twice the bound.
  constexpr int kJobs = 60, kRepeats = 125000;
  v1::BatchRequest request;
  for (int i = 0; i < kJobs; ++i) {
    v1::BatchJob* job = request.add_jobs();
    job->set_id("big" + std::to_string(i));
    v1::TimeEvaluateRequest* r = job->mutable_time_evaluate();
    r->mutable_call()->set_module_id("builtin");
    r->mutable_call()->set_function("nop");
    r->set_number(1);
    r->set_repeat(kRepeats);
  }
  const int64_t before = ResidentKb(daemon_.pid());
  ASSERT_TRUE(stream->Write(request));
  // Until the device has stopped taking the stream's jobs (or has run them all).
  int64_t completed = -1;
  for (int still = 0; still < 10;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto info = client_->Info();
    ASSERT_THAT(info, IsOk());
    const int64_t now = info->devices(0).jobs_completed();
    still = now == completed ? still + 1 : 0;
    completed = now;
  }
  EXPECT_LT(completed, kJobs);
  if (kResidentMeansHeld) {
    EXPECT_LT(ResidentKb(daemon_.pid()) - before, 96 << 10)
        << completed << " jobs done, resident " << ResidentKb(daemon_.pid()) << " kB, " << before
        << " kB before";
  }
  ASSERT_TRUE(stream->WritesDone());
  std::set<std::string> done;
  for (v1::BatchUpdate update; stream->Read(&update);) {
    if (update.state() == v1::BatchUpdate::DONE) {
      done.insert(update.id());
      EXPECT_EQ(update.time_evaluate().seconds_per_call_size(), kRepeats);
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(done.size(), static_cast<size_t>(kJobs));
}

// kprof batch writes each result as its job ends, not when the batch does: the line of a quick
// job is out while the slow job behind it still runs (the daemon has not counted it yet).
TEST_F(BatchTest, TheCliWritesEachResultAsItsJobEnds) {
  const std::string jobs = dir_.path() + "/jobs.jsonl";
  std::ofstream(jobs)
      << R"({"id": "quick", "module": "builtin", "function": "nop", "number": 1, "repeat": 1})"
      << "\n"
      << R"({"id": "slow", "module": "builtin", "function": "spin_us", "args": ["float64:1000000"], )"
         R"("number": 1, "repeat": 1})"
      << "\n";
  const auto completed = [&] {
    auto info = client_->Info();
    int64_t n = 0;
    if (info.ok()) {
      for (const auto& d : info->devices()) n += d.jobs_completed();
    }
    return n;
  };
  const int64_t before = completed();
  const std::string command = ::kprof::testing::KprofPath() + " --target " + daemon_.target() +
                              " batch " + jobs + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 65536> line{};
  ASSERT_NE(std::fgets(line.data(), static_cast<int>(line.size()), pipe), nullptr);
  const int64_t at_first_line = completed();
  const Json first = Json::parse(line.data());
  std::string rest;
  while (std::fgets(line.data(), static_cast<int>(line.size()), pipe) != nullptr) {
    rest += line.data();
  }
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_EQ(first["id"], "quick");
  EXPECT_EQ(at_first_line, before + 1) << "the first line came only once the slow job had ended";
  EXPECT_EQ(Json::parse(rest)["id"], "slow");
  EXPECT_EQ(completed(), before + 2);
}

// kprof batch: a result line per job line, malformed lines answered with their line number.
TEST_F(BatchTest, TheCliWritesAResultLinePerJob) {
  const std::string jobs = dir_.path() + "/jobs.jsonl";
  {
    std::ofstream out(jobs);
    out << R"({"id": "a", "module": "builtin", "function": "spin_us", "args": ["float64:10"], )"
           R"("number": 2, "repeat": 3})"
        << "\n"
        << R"({"id": "b", "module": ")" << TestModulePath("vector_add")
        << R"(", "function": "vadd", "args": ["float32[64]:zeros", "float32[64]:ones", )"
           R"("float32[64]:ones"], "checksums": true})"
        << "\n\n"
        << "this is not json\n"
        << R"({"id": "c", "module": "builtin", "function": "spin_us", "repet": 3})"
        << "\n"
        << R"({"id": "d", "module": "builtin", "function": "no_such"})"
        << "\n"
        << R"({"module": "builtin", "function": "spin_us"})"
        << "\n";
  }
  const auto result = ::kprof::testing::RunKprof(daemon_.target(), "batch " + jobs, dir_.path());
  EXPECT_EQ(result.exit_code, 3) << result.err;  // it ran; some jobs failed
  EXPECT_THAT(result.err, HasSubstr("4 of 6 jobs failed"));
  std::map<std::string, Json> by_id;
  std::vector<Json> lines;
  std::istringstream in(result.out);
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line);
    lines.push_back(j);
    if (j["id"].is_string()) by_id[j["id"].get<std::string>()] = j;
  }
  ASSERT_EQ(lines.size(), 6u) << result.out;
  EXPECT_EQ(by_id.at("a")["status"], "OK");
  EXPECT_EQ(by_id.at("a")["results"].size(), 3u);
  EXPECT_EQ(by_id.at("a")["number"], 2);
  EXPECT_EQ(by_id.at("b")["status"], "OK");
  EXPECT_EQ(by_id.at("b")["checksums"].size(), 3u);
  EXPECT_EQ(by_id.at("c")["status"], "INVALID_ARGUMENT");
  EXPECT_EQ(by_id.at("c")["line"], 5);
  EXPECT_THAT(by_id.at("c")["error"].get<std::string>(), HasSubstr("repet"));
  EXPECT_EQ(by_id.at("d")["status"], "NOT_FOUND");
  EXPECT_EQ(by_id.at("d")["line"], 6);
  int malformed = 0;
  for (const Json& j : lines) {
    if (j["id"].is_null()) {
      ++malformed;
      EXPECT_EQ(j["status"], "INVALID_ARGUMENT");
      EXPECT_TRUE(j["line"] == 4 || j["line"] == 7) << j.dump();
    }
  }
  EXPECT_EQ(malformed, 2);
}

// The farm's batch of `jobs`: each job's final update, by id, in `finals`.
absl::Status FarmFinals(client::Farm& farm, const std::vector<v1::BatchJob>& jobs,
                        std::map<std::string, v1::BatchUpdate>& finals) {
  return farm.MeasureBatch(jobs, [&](const v1::BatchUpdate& u) {
    if (u.state() == v1::BatchUpdate::DONE || u.state() == v1::BatchUpdate::FAILED) {
      finals[u.id()] = u;
    }
  });
}

// `n` daemons with caches under `dir`; fewer when one did not start.
std::vector<std::unique_ptr<Daemon>> StartDaemons(int n, const std::string& dir) {
  std::vector<std::unique_ptr<Daemon>> daemons;
  for (int i = 0; i < n; ++i) {
    auto daemon = std::make_unique<Daemon>();
    if (!daemon->Start(dir + "/cache" + std::to_string(i))) break;
    daemons.push_back(std::move(daemon));
  }
  return daemons;
}

// Three daemons, a thousand jobs, one daemon killed mid-batch: every job answered exactly once,
// the lost daemon's unfinished jobs run by the others, its module uploaded to them as needed.
TEST(FarmTest, ADaemonLostMidBatchLosesNoJob) {
  TempDir dir;
  std::vector<std::unique_ptr<Daemon>> daemons = StartDaemons(3, dir.path());
  ASSERT_EQ(daemons.size(), 3u);
  std::vector<std::string> addresses;
  for (const auto& d : daemons) addresses.push_back(d->target());
  auto farm = client::Farm::Connect("ipv4:" + absl::StrJoin(addresses, ","));
  ASSERT_THAT(farm, IsOk());
  ASSERT_EQ((*farm)->daemons().size(), 3u);
  const std::string module = (*farm)->AddModuleFile(TestModulePath("vector_add")).value();
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 1000; ++i) {
    v1::BatchJob job;
    job.set_id("k" + std::to_string(i));
    v1::TimeEvaluateRequest* r = job.mutable_time_evaluate();
    if (i % 2 == 0) {
      r->mutable_call()->set_module_id(module);
      r->mutable_call()->set_function("vadd");
      for (const char* a : {"float32[256]:zeros", "float32[256]:ones", "float32[256]:ones"}) {
        r->mutable_call()->add_args(a);
      }
    } else {
      r->mutable_call()->set_module_id("builtin");
      r->mutable_call()->set_function("spin_us");
      r->mutable_call()->add_args("float64:200");
    }
    jobs.push_back(job);
  }
  std::map<std::string, int> finals;
  int seen = 0;
  bool killed = false;
  const absl::Status status = (*farm)->MeasureBatch(jobs, [&](const v1::BatchUpdate& u) {
    if (u.state() != v1::BatchUpdate::DONE && u.state() != v1::BatchUpdate::FAILED) return;
    ++finals[u.id()];
    EXPECT_EQ(u.state(), v1::BatchUpdate::DONE) << u.id() << ": " << u.message();
    if (++seen == 300 && !killed) {
      kill(daemons[1]->pid(), SIGKILL);  // mid-batch, with jobs in its hands
      killed = true;
    }
  });
  ASSERT_THAT(status, IsOk());
  EXPECT_TRUE(killed);
  ASSERT_EQ(finals.size(), 1000u);
  for (const auto& [id, count] : finals) EXPECT_EQ(count, 1) << id;
}

// A long batch through a narrow window, with jobs for a device no daemon has among the others:
// once the daemons' device is full the farm stops looking further, yet every job is answered
// once, each of the others' jobs runs, and the ones no daemon can take fail saying why, the one
// at the very end too.
TEST(FarmTest, JobsForADeviceNoDaemonHasAmongManyAreEachAnsweredOnce) {
  TempDir dir;
  std::vector<std::unique_ptr<Daemon>> daemons = StartDaemons(2, dir.path());
  ASSERT_EQ(daemons.size(), 2u);
  auto farm = client::Farm::Connect(daemons[0]->target() + "," + daemons[1]->target());
  ASSERT_THAT(farm, IsOk());
  std::vector<v1::BatchJob> jobs;
  std::set<std::string> elsewhere;
  for (int i = 0; i < 3000; ++i) {
    jobs.push_back(OnceJob("n" + std::to_string(i), "builtin", "nop"));
    if (i % 1000 == 7 || i == 2999) {
      v1::BatchJob gpu = OnceJob("gpu" + std::to_string(i), "builtin", "nop");
      gpu.mutable_time_evaluate()->set_device("cuda:63");
      elsewhere.insert(gpu.id());
      jobs.push_back(gpu);
    }
  }
  std::map<std::string, int> counts;
  std::map<std::string, v1::BatchUpdate> finals;
  ASSERT_THAT(
      (*farm)->MeasureBatch(
          jobs,
          [&](const v1::BatchUpdate& u) {
            if (u.state() != v1::BatchUpdate::DONE && u.state() != v1::BatchUpdate::FAILED) {
              return;
            }
            ++counts[u.id()];
            finals[u.id()] = u;
          },
          /*window=*/2),
      IsOk());
  ASSERT_EQ(finals.size(), jobs.size());
  for (const auto& [id, count] : counts) EXPECT_EQ(count, 1) << id;
  for (const auto& [id, u] : finals) {
    if (elsewhere.count(id) > 0) {
      EXPECT_EQ(u.state(), v1::BatchUpdate::FAILED) << id;
      EXPECT_EQ(u.code(), static_cast<int32_t>(absl::StatusCode::kUnavailable)) << id;
      EXPECT_THAT(u.message(), HasSubstr("no live daemon has cuda:63")) << id;
    } else {
      EXPECT_EQ(u.state(), v1::BatchUpdate::DONE) << id << ": " << u.message();
    }
  }
}

// A daemon told to stop mid-batch answers what it runs and refuses the rest: those go to the
// others, and it gets nothing new. Every job is answered once, and OK.
TEST(FarmTest, ADaemonStoppingMidBatchHandsItsJobsOn) {
  TempDir dir;
  std::vector<std::unique_ptr<Daemon>> daemons = StartDaemons(3, dir.path());
  ASSERT_EQ(daemons.size(), 3u);
  std::vector<std::string> addresses;
  for (const auto& d : daemons) addresses.push_back(d->target());
  auto farm = client::Farm::Connect(absl::StrJoin(addresses, ","));
  ASSERT_THAT(farm, IsOk());
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 300; ++i) {
    jobs.push_back(BuiltinJob("t" + std::to_string(i), "spin_us", "float64:2000"));
  }
  std::map<std::string, int> finals;
  ASSERT_THAT((*farm)->MeasureBatch(jobs,
                                    [&](const v1::BatchUpdate& u) {
                                      if (u.state() != v1::BatchUpdate::DONE &&
                                          u.state() != v1::BatchUpdate::FAILED) {
                                        return;
                                      }
                                      EXPECT_EQ(u.state(), v1::BatchUpdate::DONE)
                                          << u.id() << ": " << u.message();
                                      if (finals.size() == 40) kill(daemons[2]->pid(), SIGTERM);
                                      ++finals[u.id()];
                                    }),
              IsOk());
  ASSERT_EQ(finals.size(), 300u);
  for (const auto& [id, count] : finals) EXPECT_EQ(count, 1) << id;
  EXPECT_EQ(daemons[2]->Stop(), 0);
}

// A module a daemon refuses fails each of its jobs with the daemon's reason; the others run.
// Candidates of one entry point, each its own module, which the farm sends on the stream with
// their first jobs: each job runs its own candidate (its `candidate` returns K, which
// fails the job saying so; its `gemm` sleeps 2K ms), and the daemon holds each module once.
TEST(FarmTest, ModulesUploadedAheadEachRunTheirOwnCandidate) {
  TempDir dir;
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache"));
  auto farm = client::Farm::Connect(daemon.target());
  ASSERT_THAT(farm, IsOk());
  std::vector<v1::BatchJob> jobs;
  for (int k = 1; k <= 6; ++k) {
    const std::string id = (*farm)->AddModule(
        ::kprof::testing::ReadFileBytes(TestModulePath(absl::StrCat("candidate_", k))),
        absl::StrCat("candidate_", k, ".so"), "auto");
    for (const char* function : {"gemm", "candidate"}) {
      jobs.push_back(OnceJob(absl::StrCat(function, k), id, function));
    }
  }
  std::map<std::string, v1::BatchUpdate> finals;
  ASSERT_THAT(FarmFinals(**farm, jobs, finals), IsOk());
  ASSERT_EQ(finals.size(), jobs.size());
  for (int k = 1; k <= 6; ++k) {
    const v1::BatchUpdate& which = finals.at(absl::StrCat("candidate", k));
    EXPECT_EQ(which.state(), v1::BatchUpdate::FAILED);
    EXPECT_THAT(which.message(), HasSubstr(absl::StrCat("returned ", k))) << k;
    const v1::BatchUpdate& gemm = finals.at(absl::StrCat("gemm", k));
    ASSERT_EQ(gemm.state(), v1::BatchUpdate::DONE) << k << ": " << gemm.message();
    // A sleep never ends early; on a busy host it may end late, by more than the candidates'
    // spacing (the `candidate` job above tells them apart).
    EXPECT_GE(gemm.time_evaluate().statistics().median(), 2e-3 * k * 0.99) << k;
  }
  auto client = client::Client::Connect(daemon.target());
  ASSERT_THAT(client, IsOk());
  auto modules = (*client)->ListModules();
  ASSERT_THAT(modules, IsOk());
  EXPECT_EQ(modules->size(), 7u);  // the builtins and the six candidates
}

// Modules over 4 MiB do not travel on the stream: the farm uploads them (ahead of their jobs),
// small ones go with their jobs; either way each job runs its own candidate.
TEST(FarmTest, LargeModulesAreUploadedAndSmallOnesTravelWithTheirJobs) {
  TempDir dir;
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache"));
  auto farm = client::Farm::Connect(daemon.target());
  ASSERT_THAT(farm, IsOk());
  std::vector<v1::BatchJob> jobs;
  for (int k : {2, 4, 1, 6}) {
    std::string bytes =
        ::kprof::testing::ReadFileBytes(TestModulePath(absl::StrCat("candidate_", k)));
    if (k % 2 == 0) bytes.resize((9 << 20) / 2, '\0');  // 4.5 MiB: past what travels inline
    const std::string id = (*farm)->AddModule(bytes, absl::StrCat("candidate_", k, ".so"), "auto");
    jobs.push_back(OnceJob(absl::StrCat("k", k), id, "candidate"));
  }
  std::map<std::string, v1::BatchUpdate> finals;
  ASSERT_THAT(FarmFinals(**farm, jobs, finals), IsOk());
  ASSERT_EQ(finals.size(), jobs.size());
  for (int k : {2, 4, 1, 6}) {
    const v1::BatchUpdate& u = finals.at(absl::StrCat("k", k));
    EXPECT_EQ(u.state(), v1::BatchUpdate::FAILED) << k;
    EXPECT_THAT(u.message(), HasSubstr(absl::StrCat("returned ", k))) << k;
  }
}

TEST(FarmTest, ARefusedModuleFailsEachOfItsJobsWithTheReason) {
  TempDir dir;
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache"));
  auto farm = client::Farm::Connect(daemon.target());
  ASSERT_THAT(farm, IsOk());
  const std::string junk = (*farm)->AddModule("not an ELF file at all", "junk.so", "auto");
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 6; ++i) {
    v1::BatchJob job;
    job.set_id("r" + std::to_string(i));
    job.mutable_time_evaluate()->mutable_call()->set_module_id(i < 4 ? junk : "builtin");
    job.mutable_time_evaluate()->mutable_call()->set_function("nop");
    jobs.push_back(job);
  }
  std::map<std::string, v1::BatchUpdate> finals;
  ASSERT_THAT(FarmFinals(**farm, jobs, finals), IsOk());
  ASSERT_EQ(finals.size(), 6u);
  for (int i = 0; i < 4; ++i) {
    const v1::BatchUpdate& u = finals.at("r" + std::to_string(i));
    EXPECT_EQ(u.state(), v1::BatchUpdate::FAILED);
    EXPECT_EQ(u.code(), static_cast<int>(absl::StatusCode::kInvalidArgument)) << u.message();
    EXPECT_EQ(u.message(), finals.at("r0").message());
    EXPECT_FALSE(u.message().empty());
  }
  EXPECT_EQ(finals.at("r4").state(), v1::BatchUpdate::DONE) << finals.at("r4").message();
  EXPECT_EQ(finals.at("r5").state(), v1::BatchUpdate::DONE) << finals.at("r5").message();
}

// A daemon draining (finishing its last job before it stops) takes nothing new: the farm's jobs
// all run on the other.
TEST(FarmTest, ADrainingDaemonGetsNoNewJobs) {
  TempDir dir;
  Daemon a, b;
  ASSERT_TRUE(a.Start(dir.path() + "/a"));
  ASSERT_TRUE(b.Start(dir.path() + "/b"));
  std::thread long_job([&b] {
    auto client = client::Client::Connect(b.target());
    v1::TimeEvaluateRequest r;
    r.mutable_call()->set_module_id("builtin");
    r.mutable_call()->set_function("sleep_us");
    r.mutable_call()->add_args("float64:1500000");
    (void)(*client)->TimeEvaluate(r);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(b.pid(), SIGTERM);  // b drains: NOT_SERVING, its running job goes on
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto farm = client::Farm::Connect(a.target() + "," + b.target());
  ASSERT_THAT(farm, IsOk());
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < 20; ++i) {
    jobs.push_back(BuiltinJob("d" + std::to_string(i), "spin_us", "float64:100"));
  }
  int done = 0;
  ASSERT_THAT((*farm)->MeasureBatch(jobs,
                                    [&](const v1::BatchUpdate& u) {
                                      EXPECT_NE(u.state(), v1::BatchUpdate::FAILED) << u.message();
                                      done += u.state() == v1::BatchUpdate::DONE;
                                    }),
              IsOk());
  EXPECT_EQ(done, 20);
  long_job.join();
  EXPECT_EQ(b.Stop(), 0);
}

TEST(FarmTest, TargetsNameOneOrManyDaemons) {
  EXPECT_THAT(client::ResolveTarget("127.0.0.1:9177"), IsOkAndHolds(ElementsAre("127.0.0.1:9177")));
  EXPECT_THAT(client::ResolveTarget("ipv4:10.0.0.1:9177,10.0.0.2:9178"),
              IsOkAndHolds(ElementsAre("10.0.0.1:9177", "10.0.0.2:9178")));
  EXPECT_THAT(client::ResolveTarget("ipv6:[::1]:9177"), IsOkAndHolds(ElementsAre("[::1]:9177")));
  EXPECT_THAT(client::ResolveTarget("dns:///localhost:9177"),
              IsOkAndHolds(Contains(AnyOf("127.0.0.1:9177", "[::1]:9177"))));
  EXPECT_THAT(client::ResolveTarget("dns:///no-such-host.invalid:9177"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no-such-host.invalid")));
  EXPECT_THAT(client::ResolveTarget("ipv4:10.0.0.1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not HOST:PORT")));
}

// kprof batch over several daemons: the target lists them.
TEST(FarmTest, TheCliSpreadsABatchOverTheDaemons) {
  TempDir dir;
  Daemon a, b;
  ASSERT_TRUE(a.Start(dir.path() + "/a"));
  ASSERT_TRUE(b.Start(dir.path() + "/b"));
  const std::string jobs = dir.path() + "/jobs.jsonl";
  {
    std::ofstream out(jobs);
    for (int i = 0; i < 40; ++i) {
      out << R"({"id": "s)" << i
          << R"(", "module": "builtin", "function": "spin_us", "args": ["float64:100"]})"
          << "\n";
    }
  }
  const auto result =
      ::kprof::testing::RunKprof(a.target() + "," + b.target(), "batch " + jobs, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::istringstream in(result.out);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    EXPECT_EQ(Json::parse(line)["status"], "OK");
    ++lines;
  }
  EXPECT_EQ(lines, 40);
  // Both daemons ran some.
  for (Daemon* d : {&a, &b}) {
    auto client = client::Client::Connect(d->target());
    ASSERT_THAT(client, IsOk());
    auto info = (*client)->Info();
    ASSERT_THAT(info, IsOk());
    EXPECT_GT(info->devices(0).jobs_completed(), 0) << d->target();
  }
}

}  // namespace
}  // namespace kprof

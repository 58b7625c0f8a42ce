// MeasureBatch through a real kprofd: thousands of jobs on one stream, each answered exactly
// once, failures among them, updates sharing messages, refused options and ids, shutdown, a
// crash, a client that goes away or does not read.
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
using ::kprof::testing::kResidentMeansHeld;
using ::kprof::testing::ResidentKb;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace kprof

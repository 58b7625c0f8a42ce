// Batches against daemons that misbehave: a fake daemon (a gRPC server of the kprof service, in
// this process) that sends updates for ids it was never given, or says a job is running and then
// nothing; and a real daemon frozen mid-batch (SIGSTOP). The farm and `kprof batch` ignore the
// strays, never hang, and send a silent or frozen daemon's jobs to the others, each answered once.
#include <signal.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "batch_fixture.h"
#include "cli.h"
#include "client/farm.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;

// A daemon of cpu:0 whose jobs may run 0.2 s, misbehaving as told.
class RogueDaemon final : public v1::Profiler::Service {
 public:
  enum class Mode {
    kStrays,  // before each job's answer, an answer for an id no one sent
    kSilent,  // each job said to be running, and then nothing
  };

  explicit RogueDaemon(Mode mode) : mode_(mode) {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    server_->GetHealthCheckService()->SetServingStatus("kprof.v1.Profiler", true);
  }
  ~RogueDaemon() override { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                       v1::GetInfoResponse* response) override {
    response->add_devices()->set_device("cpu:0");
    response->mutable_limits()->set_job_timeout_seconds(0.2);
    return grpc::Status::OK;
  }

  grpc::Status MeasureBatch(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::BatchUpdate, v1::BatchRequest>* stream) override {
    v1::BatchRequest request;
    while (stream->Read(&request)) {  // until the client closes or cancels
      for (const v1::BatchJob& job : request.jobs()) {
        v1::BatchUpdate update;
        update.set_id(job.id());
        if (mode_ == Mode::kSilent) {
          update.set_state(v1::BatchUpdate::RUNNING);
          stream->Write(update);
          continue;
        }
        update.set_state(v1::BatchUpdate::DONE);
        update.mutable_time_evaluate()->add_seconds_per_call(1e-6);
        update.mutable_time_evaluate()->add_numbers(1);
        v1::BatchUpdate stray = update;
        stray.set_id("\x1b[2Jstray-" + job.id());
        stream->Write(stray);
        stream->Write(update);
      }
    }
    return grpc::Status::OK;
  }

 private:
  const Mode mode_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

std::vector<v1::BatchJob> Spins(int n, const std::string& prefix) {
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < n; ++i) {
    jobs.push_back(BuiltinJob(prefix + std::to_string(i), "spin_us", "float64:500"));
  }
  return jobs;
}

// Each id's final updates, by id.
std::map<std::string, std::vector<v1::BatchUpdate>> Finals(client::Farm& farm,
                                                           const std::vector<v1::BatchJob>& jobs,
                                                           absl::Status* status) {
  std::map<std::string, std::vector<v1::BatchUpdate>> finals;
  *status = farm.MeasureBatch(jobs, [&](const v1::BatchUpdate& u) {
    if (u.state() == v1::BatchUpdate::DONE || u.state() == v1::BatchUpdate::FAILED) {
      finals[u.id()].push_back(u);
    }
  });
  return finals;
}

TEST(RogueDaemonTest, UpdatesForIdsNoJobHasAreIgnored) {
  RogueDaemon rogue(RogueDaemon::Mode::kStrays);
  auto farm = client::Farm::Connect(rogue.target());
  ASSERT_THAT(farm, IsOk());
  const std::vector<v1::BatchJob> jobs = Spins(20, "s");
  absl::Status status;
  const auto finals = Finals(**farm, jobs, &status);
  ASSERT_THAT(status, IsOk());
  ASSERT_EQ(finals.size(), jobs.size());  // the strays neither answered nor counted a job
  for (const auto& [id, updates] : finals) {
    EXPECT_EQ(updates.size(), 1u) << id;
    EXPECT_EQ(updates[0].state(), v1::BatchUpdate::DONE) << id;
  }

  // kprof batch writes every line, none for a stray, and says once what it ignored (escaped).
  TempDir dir;
  std::ofstream lines(dir.path() + "/jobs.jsonl");
  for (int i = 0; i < 5; ++i) {
    lines << nlohmann::json{{"id", absl::StrCat("j", i)},
                            {"module", "builtin"},
                            {"function", "nop"},
                            {"args", nlohmann::json::array()}}
                 .dump()
          << "\n";
  }
  lines.close();
  const testing::CliResult batch =
      testing::RunKprof(rogue.target(), "batch " + dir.path() + "/jobs.jsonl", dir.path());
  EXPECT_EQ(batch.exit_code, 0) << batch.err;
  std::map<std::string, std::string> status_of;
  std::istringstream out(batch.out);
  for (std::string line; std::getline(out, line);) {
    const auto result = nlohmann::json::parse(line);
    status_of[result["id"]] = result["status"];
  }
  EXPECT_EQ(status_of, (std::map<std::string, std::string>{
                           {"j0", "OK"}, {"j1", "OK"}, {"j2", "OK"}, {"j3", "OK"}, {"j4", "OK"}}));
  EXPECT_THAT(batch.err, HasSubstr("which is no job of this batch: ignored"));
  EXPECT_THAT(batch.err, HasSubstr("\\x1b[2Jstray-j"));
  EXPECT_EQ(batch.err.find('\x1b'), std::string::npos) << "a raw escape reached the terminal";
}

// A daemon that says a job runs and then says nothing is given up on once the job is far past
// the daemon's own limit for a job: its jobs run on the other daemon, each answered once; alone,
// its jobs fail saying why, and the batch ends.
TEST(RogueDaemonTest, ADaemonSilentAfterRunningIsLostAndItsJobsRunElsewhere) {
  RogueDaemon silent(RogueDaemon::Mode::kSilent);
  TempDir dir;
  Daemon real;
  ASSERT_TRUE(real.Start(dir.path() + "/cache"));
  auto farm = client::Farm::Connect(silent.target() + "," + real.target());
  ASSERT_THAT(farm, IsOk());
  const std::vector<v1::BatchJob> jobs = Spins(40, "t");
  absl::Status status;
  auto finals = Finals(**farm, jobs, &status);
  ASSERT_THAT(status, IsOk());
  ASSERT_EQ(finals.size(), jobs.size());
  for (const auto& [id, updates] : finals) {
    ASSERT_EQ(updates.size(), 1u) << id;
    EXPECT_EQ(updates[0].state(), v1::BatchUpdate::DONE) << id << ": " << updates[0].message();
  }

  auto alone = client::Farm::Connect(silent.target());
  ASSERT_THAT(alone, IsOk());
  finals = Finals(**alone, Spins(3, "u"), &status);
  ASSERT_THAT(status, IsOk());
  ASSERT_EQ(finals.size(), 3u);
  for (const auto& [id, updates] : finals) {
    ASSERT_EQ(updates.size(), 1u) << id;
    EXPECT_EQ(updates[0].state(), v1::BatchUpdate::FAILED) << id;
    EXPECT_THAT(updates[0].message(), HasSubstr("s ago and has not answered since (its jobs may "
                                                "run 0.2 s)"));
  }
}

// A real daemon stopped (SIGSTOP) mid-batch answers nothing, not even its channel's pings: the
// farm gives it up after its keepalive and runs its jobs on the other daemon.
TEST(RogueDaemonTest, AFrozenDaemonIsLostAfterItsKeepaliveAndItsJobsRunElsewhere) {
  TempDir dir;
  Daemon first, second;
  ASSERT_TRUE(first.Start(dir.path() + "/cache1"));
  ASSERT_TRUE(second.Start(dir.path() + "/cache2"));
  client::ClientOptions options;
  options.keepalive = absl::Seconds(2);  // twice the interval kprofd takes pings at
  auto farm = client::Farm::Connect(first.target() + "," + second.target(), options);
  ASSERT_THAT(farm, IsOk());
  const std::vector<v1::BatchJob> jobs = Spins(300, "f");
  std::map<std::string, int> counts;
  bool stopped = false;
  const absl::Time start = absl::Now();
  const absl::Status status = (*farm)->MeasureBatch(jobs, [&](const v1::BatchUpdate& u) {
    if (u.state() != v1::BatchUpdate::DONE && u.state() != v1::BatchUpdate::FAILED) return;
    EXPECT_EQ(u.state(), v1::BatchUpdate::DONE) << u.id() << ": " << u.message();
    if (++counts[u.id()] == 1 && counts.size() == 30 && !stopped) {
      stopped = kill(second.pid(), SIGSTOP) == 0;
    }
  });
  kill(second.pid(), SIGCONT);
  ASSERT_THAT(status, IsOk());
  EXPECT_TRUE(stopped);
  ASSERT_EQ(counts.size(), jobs.size());
  for (const auto& [id, count] : counts) EXPECT_EQ(count, 1) << id;
  // The pings' second and its second again, not a call's deadline (60 s).
  EXPECT_LT(absl::Now() - start, absl::Seconds(45));
}

}  // namespace
}  // namespace kprof

// A farm of real daemons: a batch spread over them, a daemon lost, stopping or draining mid-batch,
// modules uploaded ahead or sent with their jobs, targets that name one or many daemons.
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

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

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
          << R"(", "module": "builtin", "function": "spin_us", "args": ["float64:100"], )"
             R"("repeat": 1})"
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

// WorkerJobs, in this process: modules stay open between jobs, but only so many.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "server/worker/worker_job.h"
#include "temp_dir.h"

namespace kprof::server {
namespace {

using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using kprof::worker::v1::WorkerRequest;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

class WorkerJobsTest : public ::testing::Test {
 protected:
  // Module i: a copy of vector_add.so of its own (the daemon names modules by their bytes'
  // SHA-256; here any distinct id will do).
  std::string ModulePath(int i) {
    const std::string path = dir_.path() + "/m" + std::to_string(i) + ".so";
    if (!std::filesystem::exists(path)) {
      std::filesystem::copy_file(TestModulePath("vector_add"), path);
    }
    return path;
  }

  // A vadd over 4 floats in module i.
  WorkerRequest Vadd(int i) {
    WorkerRequest request;
    request.set_job_id(static_cast<uint64_t>(i) + 1);
    auto* file = request.add_modules();
    file->set_id("m" + std::to_string(i));
    file->set_path(ModulePath(i));
    auto* call = request.mutable_time_evaluate()->mutable_call();
    call->set_module_id(file->id());
    call->set_function("vadd");
    for (const char* spec : {"float32[4]", "float32[4]:ones", "float32[4]:ones"}) {
      call->add_args(spec);
    }
    return request;
  }

  TempDir dir_;
};

TEST_F(WorkerJobsTest, KeepsAtMostTheLimitOfModulesOpen) {
  WorkerJobs jobs(kCpu, /*max_open_modules=*/4);
  for (int i = 0; i < 10; ++i) {
    const auto response = jobs.Run(Vadd(i));
    ASSERT_EQ(response.code(), 0) << response.message();
    EXPECT_LE(jobs.modules_open(), 5u) << "after job " << i;  // the limit, plus this job's
  }
  // A closed module opens again when a job names it.
  const auto again = jobs.Run(Vadd(0));
  EXPECT_EQ(again.code(), 0) << again.message();
}

TEST_F(WorkerJobsTest, RecentlyUsedModulesStayOpen) {
  WorkerJobs jobs(kCpu, /*max_open_modules=*/2);
  ASSERT_EQ(jobs.Run(Vadd(0)).code(), 0);
  ASSERT_EQ(jobs.Run(Vadd(1)).code(), 0);
  ASSERT_EQ(jobs.Run(Vadd(0)).code(), 0);  // 0 is now more recent than 1
  ASSERT_EQ(jobs.Run(Vadd(2)).code(), 0);  // closes nothing yet: 3 open after it
  EXPECT_EQ(jobs.modules_open(), 3u);
  ASSERT_EQ(jobs.Run(Vadd(3)).code(), 0);  // closes 1, the least recently used
  EXPECT_EQ(jobs.modules_open(), 3u);
  EXPECT_FALSE(jobs.is_open("m1"));
  EXPECT_TRUE(jobs.is_open("m0"));
  EXPECT_TRUE(jobs.is_open("m3"));
}

TEST_F(WorkerJobsTest, AJobMayNameMoreModulesThanTheLimit) {
  WorkerJobs jobs(kCpu, /*max_open_modules=*/2);
  WorkerRequest request;
  request.set_job_id(1);
  auto* profile = request.mutable_profile();
  for (int i = 0; i < 5; ++i) {
    auto* file = request.add_modules();
    file->set_id("m" + std::to_string(i));
    file->set_path(ModulePath(i));
    auto* call = profile->add_calls();
    call->set_module_id(file->id());
    call->set_function("vadd");
    for (const char* spec : {"float32[4]", "float32[4]:ones", "float32[4]:ones"}) {
      call->add_args(spec);
    }
  }
  const auto response = jobs.Run(request);
  ASSERT_EQ(response.code(), 0) << response.message();
  EXPECT_EQ(response.profile().report().calls_size(), 5);
  ASSERT_EQ(jobs.Run(Vadd(7)).code(), 0);  // then the idle ones close
  EXPECT_LE(jobs.modules_open(), 3u);
}

// The front withholds the files of modules the worker has open, from what the worker's answers
// say: each answer names the modules closed since the one before (by the limit, or never
// opened because loading failed); a job whose modules were withheld but are not open is
// answered withdrawn, without running, to come again with its files.
TEST_F(WorkerJobsTest, AnswersSayWhichModulesClosedAndAWithheldModuleNotOpenIsSentBack) {
  WorkerJobs jobs(kCpu, /*max_open_modules=*/2);
  const auto closed = [](const kprof::worker::v1::WorkerResponse& response) {
    return std::vector<std::string>(response.closed_modules().begin(),
                                    response.closed_modules().end());
  };
  using ::testing::ElementsAre;
  using ::testing::IsEmpty;
  // Not open yet, withheld: sent back, naming it.
  WorkerRequest withheld = Vadd(0);
  withheld.set_module_files_withheld(true);
  auto response = jobs.Run(withheld);
  EXPECT_TRUE(response.withdrawn());
  EXPECT_FALSE(response.has_time_evaluate());
  EXPECT_THAT(closed(response), ElementsAre("m0"));
  EXPECT_FALSE(jobs.is_open("m0"));
  // Sent with its file, it opens; withheld after that, it runs.
  response = jobs.Run(Vadd(0));
  ASSERT_EQ(response.code(), 0) << response.message();
  EXPECT_THAT(closed(response), IsEmpty());
  response = jobs.Run(withheld);
  EXPECT_FALSE(response.withdrawn());
  ASSERT_EQ(response.code(), 0) << response.message();
  EXPECT_TRUE(response.has_time_evaluate());
  ASSERT_EQ(jobs.Run(Vadd(1)).code(), 0);
  ASSERT_EQ(jobs.Run(Vadd(2)).code(), 0);  // three open after it: none closed yet
  response = jobs.Run(Vadd(3));            // closes m0, the least recently used
  ASSERT_EQ(response.code(), 0) << response.message();
  EXPECT_THAT(closed(response), ElementsAre("m0"));
  response = jobs.Run(Vadd(4));  // closes m1 (m0's closing was told already)
  EXPECT_THAT(closed(response), ElementsAre("m1"));
  response = jobs.Run(withheld);
  EXPECT_TRUE(response.withdrawn());
  EXPECT_THAT(closed(response), ElementsAre("m0"));  // not open: it did not run
  // A module that fails to load is named too: it is not open.
  WorkerRequest lost = Vadd(5);
  lost.mutable_modules(0)->set_path(dir_.path() + "/not-there.so");
  response = jobs.Run(lost);
  EXPECT_NE(response.code(), 0);
  EXPECT_THAT(closed(response), ::testing::Contains("m5"));
}

// The daemon hands a worker its modules as descriptors: the bytes are read from them (the
// path, which a worker's sandbox does not let it open, is only for messages), and candidates
// sharing an entry point each run their own code.
TEST_F(WorkerJobsTest, ModulesComeFromTheirDescriptorsNotTheirPaths) {
  WorkerJobs jobs(kCpu);
  uint64_t job = 0;
  for (int k : {3, 1, 3}) {
    const std::string name = "candidate_" + std::to_string(k);
    const int fd = open(TestModulePath(name).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    WorkerRequest request;
    request.set_job_id(++job);
    auto* file = request.add_modules();
    file->set_id(name);
    file->set_path(dir_.path() + "/not-there/" + name);
    auto* r = request.mutable_time_evaluate();
    r->mutable_call()->set_module_id(name);
    r->mutable_call()->set_function("gemm");
    r->set_number(1);
    r->set_repeat(3);
    const int fds[] = {fd};
    const auto response = jobs.Run(request, fds);
    close(fd);
    ASSERT_EQ(response.code(), 0) << response.message();
    const double fastest = response.time_evaluate().statistics().min();
    EXPECT_GE(fastest, k * 2e-3 * 0.995) << name;
    EXPECT_LE(fastest, k * 2e-3 * 1.10) << name;
  }
  // Without a descriptor, the path is all there is.
  WorkerRequest lost = Vadd(0);
  lost.mutable_modules(0)->set_path(dir_.path() + "/not-there.so");
  EXPECT_NE(jobs.Run(lost).code(), 0);
}

// An autotuner's candidates through one worker that keeps two of them open: each exports gemm
// and takes its own 2k ms; interleaved, closed by the LRU and opened again, every job measures
// its own candidate.
TEST_F(WorkerJobsTest, CandidatesSharingAnEntryPointEachMeasureTheirOwnCost) {
  WorkerJobs jobs(kCpu, /*max_open_modules=*/2);
  const auto time = [&](const std::string& name, const std::string& function, uint64_t job) {
    WorkerRequest request;
    request.set_job_id(job);
    auto* file = request.add_modules();
    file->set_id(name);
    file->set_path(TestModulePath(name));
    auto* r = request.mutable_time_evaluate();
    r->mutable_call()->set_module_id(name);
    r->mutable_call()->set_function(function);
    r->set_number(1);
    r->set_repeat(10);  // the fastest of ten: a sleep on a loaded host can wake 1.5 ms late
    return jobs.Run(request);
  };
  uint64_t job = 0;
  for (int k : {3, 1, 6, 2, 5, 4, 1, 6, 3, 4, 2, 5}) {
    const auto response = time("candidate_" + std::to_string(k), "gemm", ++job);
    ASSERT_EQ(response.code(), 0) << response.message();
    // The fastest repeat: a busy host only makes repeats longer, and a sleep to a deadline
    // never ends early; the nearest neighbour is 11% away.
    const double fastest = response.time_evaluate().statistics().min();
    EXPECT_GE(fastest, k * 2e-3 * 0.995) << "candidate_" << k << " in job " << job;
    EXPECT_LE(fastest, k * 2e-3 * 1.10) << "candidate_" << k << " in job " << job;
    EXPECT_LE(jobs.modules_open(), 3u);
  }
  for (const auto& [name, function, seconds] :
       {std::tuple{"candidate_libm", "gemm", 5e-3}, std::tuple{"candidate_saxpy", "my_saxpy", 7e-3},
        std::tuple{"candidate_nodelete", "gemm", 9e-3}, std::tuple{"candidate_2", "gemm", 4e-3},
        std::tuple{"candidate_libm", "gemm", 5e-3}}) {
    const auto response = time(name, function, ++job);
    ASSERT_EQ(response.code(), 0) << name << ": " << response.message();
    const double fastest = response.time_evaluate().statistics().min();
    EXPECT_GE(fastest, seconds * 0.995) << name;
    EXPECT_LE(fastest, seconds * 1.10) << name;
  }
}

// The daemon's question at start: the CPU part lists cpu:0 and its collectors, the CUDA part
// the GPUs or why there are none. Neither needs a module.
// The host's part of the manifest goes to the front once, with the first result; each result
// carries the job's part.
TEST_F(WorkerJobsTest, SendsTheHostsPartOfTheManifestOnceAndTheJobsPartWithEveryResult) {
  WorkerJobs jobs(kCpu, /*max_open_modules=*/4);
  for (int i = 0; i < 3; ++i) {
    const auto response = jobs.Run(Vadd(0));
    ASSERT_EQ(response.code(), 0) << response.message();
    const auto& job = response.time_evaluate().environment().metrics();
    EXPECT_EQ(job.count("Load average"), 1u) << "job " << i;
    EXPECT_EQ(job.count("Runnable processes"), 1u) << "job " << i;
    EXPECT_EQ(job.count("Host"), 0u) << "job " << i;
    EXPECT_EQ(response.has_host_environment(), i == 0) << "job " << i;
    if (i == 0) {
      const auto& host = response.host_environment().metrics();
      for (const char* key : {"kprofd version", "Host", "Kernel", "CPU model", "CPU governor"}) {
        EXPECT_EQ(host.count(key), 1u) << key;
        EXPECT_EQ(job.count(key), 0u) << key;
      }
    }
  }
}

TEST(WorkerDescribeTest, DescribesTheCpuAndTheGpusInTwoParts) {
  WorkerJobs jobs(kCpu);
  WorkerRequest request;
  request.set_job_id(1);
  request.mutable_describe();
  const auto cpu = jobs.Run(request);
  ASSERT_EQ(cpu.code(), 0) << cpu.message();
  ASSERT_EQ(cpu.host().devices_size(), 1);
  const auto& info = cpu.host().devices(0);
  EXPECT_EQ(info.device(), "cpu:0");
  EXPECT_EQ(info.type(), "cpu");
  EXPECT_FALSE(info.cpu_model().empty());
  EXPECT_GE(info.cpus(), 1);
  std::vector<std::string> names;
  for (const auto& c : info.collectors()) names.push_back(c.name());
  EXPECT_THAT(names, ::testing::IsSupersetOf({"rusage", "perf", "papi"}));
  EXPECT_TRUE(cpu.host().cuda().empty());
  EXPECT_TRUE(cpu.host().cuda_unavailable().empty());

  request.set_job_id(2);
  request.mutable_describe()->set_cuda(true);
  const auto gpus = jobs.Run(request);
  ASSERT_EQ(gpus.code(), 0) << gpus.message();
  // Either GPUs with the driver's line, or none with the reason.
  EXPECT_NE(gpus.host().devices_size() > 0, !gpus.host().cuda_unavailable().empty());
  for (const auto& gpu : gpus.host().devices()) {
    EXPECT_EQ(gpu.type(), "cuda");
    EXPECT_THAT(gpus.host().cuda(), ::testing::HasSubstr(gpu.device()));
  }
}

}  // namespace
}  // namespace kprof::server

// What the batch tests share (batch_*test.cc): jobs of builtin and test-module functions, and
// the fixture of a real kprofd on 127.0.0.1:0 with a client of it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof {

// A TimeEvaluate job of a builtin function with one argument.
inline v1::BatchJob BuiltinJob(const std::string& id, const std::string& function,
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
inline v1::BatchJob OnceJob(const std::string& id, const std::string& module,
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
    ASSERT_THAT(connected, ::kprof::testing::IsOk());
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

  ::kprof::testing::TempDir dir_;
  ::kprof::testing::Daemon daemon_;
  std::unique_ptr<client::Client> client_;
  v1::BatchUpdate last_;
};

}  // namespace kprof

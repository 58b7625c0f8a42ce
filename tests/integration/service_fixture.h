// The fixture of the service tests (service_*test.cc): a real kprofd on 127.0.0.1:0 with its
// cache in a fresh directory, and a client of it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof::testing {

class ServiceTest : public ::testing::Test {
 protected:
  void StartDaemon(const std::vector<std::string>& extra = {}) {
    ASSERT_TRUE(daemon_.Start(cache_.path() + "/cache", extra))
        << "kprofd did not start, status " << daemon_.exit_status();
    client::ClientOptions options;
    options.chunk_bytes = 4096;  // several chunks even for small test modules
    options.timeout = absl::Seconds(30);
    auto connected = client::Client::Connect(daemon_.target(), options);
    ASSERT_THAT(connected, ::kprof::testing::IsOk());
    client_ = std::move(*connected);
  }
  void SetUp() override { StartDaemon(); }

  static v1::TimeEvaluateRequest Time(const std::string& module, const std::string& function,
                                      std::vector<std::string> args) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(module);
    request.mutable_call()->set_function(function);
    for (auto& a : args) request.mutable_call()->add_args(a);
    return request;
  }

  TempDir cache_;
  Daemon daemon_;
  std::unique_ptr<client::Client> client_;
};

}  // namespace kprof::testing

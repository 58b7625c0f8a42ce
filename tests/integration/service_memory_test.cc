// A client's hold on the daemon's memory: four MeasureBatch streams at once at most (each holds
// a bounded share of jobs and updates), and what its streams held given back when they end.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "processes.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::ConnectAs;
using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::ResidentKb;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;

// A raw MeasureBatch stream with client I's token.
struct Stream {
  Stream(const std::string& target, int i)
      : stub(v1::Profiler::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {
    context.AddMetadata("authorization", absl::StrCat("Bearer token-", i));
    stream = stub->MeasureBatch(&context);
  }
  std::unique_ptr<v1::Profiler::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::BatchRequest, v1::BatchUpdate>> stream;
};

// `count` jobs of copy over 64 KiB with 64 KiB of expected data each (which the copy does not
// match: each job ends a wrong answer, after it held its bytes while it waited).
v1::BatchRequest BigJobs(const std::string& prefix, int count) {
  v1::BatchRequest request;
  for (int i = 0; i < count; ++i) {
    v1::BatchJob* job = request.add_jobs();
    job->set_id(absl::StrCat(prefix, i));
    v1::TimeEvaluateRequest* r = job->mutable_time_evaluate();
    r->mutable_call()->set_module_id("builtin");
    r->mutable_call()->set_function("copy");
    r->mutable_call()->add_args("float32[16384]");
    r->mutable_call()->add_args("float32[16384]:random");
    v1::ExpectedOutput* expected = r->mutable_check()->add_expected();
    expected->set_dtype("float32");
    expected->add_shape(16384);
    expected->set_data(std::string(16384 * 4, static_cast<char>(i)));
  }
  return request;
}

class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache",
                              {"--token-file", ::kprof::testing::WriteTokenFile(dir_.path(), 2)}));
  }
  TempDir dir_;
  Daemon daemon_;
};

TEST_F(MemoryTest, AClientHasFourBatchStreamsOpenAtMostAndAnotherClientItsOwn) {
  std::vector<std::unique_ptr<Stream>> open;
  for (int s = 0; s < 4; ++s) {
    open.push_back(std::make_unique<Stream>(daemon_.target(), 0));
    ASSERT_TRUE(open.back()->stream->Write(BigJobs(absl::StrCat("s", s, "-"), 1)));
    v1::BatchUpdate update;
    ASSERT_TRUE(open.back()->stream->Read(&update)) << "stream " << s;  // admitted: it answers
  }
  Stream fifth(daemon_.target(), 0);
  v1::BatchUpdate update;
  EXPECT_FALSE(fifth.stream->Read(&update));
  const grpc::Status refused = fifth.stream->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("client 'client-0' has 4 MeasureBatch streams open, as many as a client "
                        "may"));
  Stream other(daemon_.target(), 1);
  ASSERT_TRUE(other.stream->Write(BigJobs("o", 1)));
  ASSERT_TRUE(other.stream->Read(&update));
  for (auto& s : open) {
    s->stream->WritesDone();
    while (s->stream->Read(&update)) {
    }
    EXPECT_TRUE(s->stream->Finish().ok());
  }
  // One ended: a stream of client 0's is admitted again.
  Stream again(daemon_.target(), 0);
  ASSERT_TRUE(again.stream->Write(BigJobs("a", 1)));
  EXPECT_TRUE(again.stream->Read(&update));
}

TEST_F(MemoryTest, WhatAClientsStreamsHeldGoesBackWhenTheyEnd) {
  if (!::kprof::testing::kResidentMeansHeld) GTEST_SKIP() << "resident size is no measure here";
  {
    Stream warm(daemon_.target(), 0);  // the worker, the builtin's pages, gRPC's buffers
    ASSERT_TRUE(warm.stream->Write(BigJobs("w", 4)));
    warm.stream->WritesDone();
    for (v1::BatchUpdate update; warm.stream->Read(&update);) {
    }
    ASSERT_TRUE(warm.stream->Finish().ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t before = ResidentKb(daemon_.pid());
  std::vector<std::thread> streams;
  for (int s = 0; s < 4; ++s) {
    streams.emplace_back([&, s] {
      Stream stream(daemon_.target(), 0);
      // 2400 jobs of 64 KiB in messages of 100: 150 MiB sent, of which the stream holds 32 MiB
      // of waiting jobs at most.
      for (int m = 0; m < 24; ++m) {
        if (!stream.stream->Write(BigJobs(absl::StrCat("s", s, "m", m, "-"), 100))) break;
      }
      stream.stream->WritesDone();
      int ended = 0;
      for (v1::BatchUpdate update; stream.stream->Read(&update);) {
        ended +=
            update.state() == v1::BatchUpdate::DONE || update.state() == v1::BatchUpdate::FAILED;
      }
      EXPECT_TRUE(stream.stream->Finish().ok());
      EXPECT_EQ(ended, 2400) << "stream " << s;
    });
  }
  for (std::thread& t : streams) t.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t after = ResidentKb(daemon_.pid());
  EXPECT_LT(after - before, 48 << 10)
      << "resident " << after << " kB after, " << before << " kB before";
}

TEST_F(MemoryTest, AClientsCallsHold64MiBAtMostUntilTheyAreAnswered) {
  auto client = ConnectAs(daemon_.target(), 0);
  ASSERT_THAT(client, IsOk());
  v1::TimeEvaluateRequest sleep;
  sleep.mutable_call()->set_module_id("builtin");
  sleep.mutable_call()->set_function("sleep_us");
  sleep.mutable_call()->add_args("float64:1500000");
  std::thread busy([&] { EXPECT_THAT((*client)->TimeEvaluate(sleep), IsOk()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // 12 calls of 10 MiB each while the device is busy: six of them are held at most.
  v1::TimeEvaluateRequest big = BigJobs("", 1).jobs(0).time_evaluate();
  big.mutable_call()->set_args(0, "float32[2621440]");
  big.mutable_call()->set_args(1, "float32[2621440]:random");
  big.mutable_check()->mutable_expected(0)->set_shape(0, 2621440);
  big.mutable_check()->mutable_expected(0)->set_data(std::string(10 << 20, 'x'));
  absl::Mutex mutex;
  std::vector<absl::Status> answers;
  std::vector<std::thread> calls;
  for (int c = 0; c < 12; ++c) {
    calls.emplace_back([&] {
      absl::Status status = (*client)->TimeEvaluate(big).status();
      absl::MutexLock lock(&mutex);
      answers.push_back(std::move(status));
    });
  }
  for (std::thread& t : calls) t.join();
  busy.join();
  int refused = 0;
  for (const absl::Status& s : answers) {
    // The others ran: a wrong answer (the copy is not the expected data).
    if (!absl::IsResourceExhausted(s)) {
      EXPECT_THAT(
          s, ::kprof::testing::StatusIs(absl::StatusCode::kAborted, HasSubstr("wrong answer")));
      continue;
    }
    ++refused;
    EXPECT_THAT(s.message(), HasSubstr("MiB of calls waiting or running, and this one's 10.0 MiB "
                                       "would pass 64 MiB a client; retry as they end"));
  }
  EXPECT_GE(refused, 1);
  EXPECT_LE(refused, 12 - 6);
}

}  // namespace
}  // namespace kprof

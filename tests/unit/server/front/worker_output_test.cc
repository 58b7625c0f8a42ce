#include "server/front/workers/worker_output.h"

#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.pb.h"
#include "status_matchers.h"

namespace kprof::server {
namespace {

using ::kprof::testing::IsOk;
using ::testing::HasSubstr;

TEST(EscapeOutput, KeepsTextAndUtf8AndEscapesWhatWouldDriveATerminal) {
  EXPECT_EQ(EscapeOutput("plain\ttext\n"), "plain\ttext\n");
  EXPECT_EQ(EscapeOutput("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x99\x82"),
            "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x99\x82");
  EXPECT_EQ(EscapeOutput("\x1b[2J\r\x7f"), "\\x1b[2J\\x0d\\x7f");
  EXPECT_EQ(EscapeOutput(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeOutput("\xc2\x9b"
                         "31m"),
            "\\u009b31m");  // the C1 CSI
  EXPECT_EQ(EscapeOutput("\xff\xc0\xaf\xed\xa0\x80"), "\\xff\\xc0\\xaf\\xed\\xa0\\x80");
  EXPECT_EQ(EscapeOutput("cut \xe6\x97"), "cut \\xe6\\x97");  // a sequence cut short
}

TEST(WorkerOutput, KeepsTheEndOfWhatAPipeCarriedAndCountsAll) {
  auto output = WorkerOutput::Start(/*log_bytes=*/0);
  ASSERT_THAT(output, IsOk());
  auto pipe = (*output)->Open("test worker");
  ASSERT_THAT(pipe, IsOk());
  const auto [key, write_end] = *pipe;
  const std::string block(1000, 'x');
  for (int i = 0; i < 100; ++i) ASSERT_EQ(write(write_end, block.data(), block.size()), 1000);
  ASSERT_EQ(write(write_end, "the end\n", 8), 8);
  const WorkerOutput::Taken taken = (*output)->Take(key);
  EXPECT_EQ(taken.bytes, 100008u);
  EXPECT_EQ(taken.tail.size(), WorkerOutput::kKeptBytes);
  EXPECT_THAT(taken.tail, ::testing::EndsWith("xxxthe end\n"));
  // Each Take has what came since the one before.
  EXPECT_EQ((*output)->Take(key).bytes, 0u);
  ASSERT_EQ(write(write_end, "again\n", 6), 6);
  close(write_end);
  EXPECT_EQ((*output)->Take(key).tail, "again\n");
  (*output)->Close(key);
  EXPECT_EQ((*output)->Take(key).bytes, 0u);  // a key closed: nothing
}

TEST(WorkerOutput, AnErrorAnswerEndsWithWhatWasPrintedLastAndAResultCarriesIt) {
  WorkerOutput::Taken taken{"one\ntwo\nthree\nfour\n", 19};
  EXPECT_EQ(OutputEnding(taken), "; its output ended: \"...two|three|four\"");
  EXPECT_EQ(OutputEnding({"", 0}), "");
  EXPECT_EQ(OutputEnding({std::string(1000, 'y'), 1000}),
            "; its output ended: \"..." + std::string(300, 'y') + "\"");
  kprof::worker::v1::WorkerAnswer failed;
  failed.set_code(9);
  failed.set_message("function 'f' returned 3");
  AttachOutput(taken, &failed);
  EXPECT_THAT(failed.message(), HasSubstr("returned 3; its output ended: \"...two|three|four\""));
  kprof::worker::v1::WorkerAnswer ok;
  ok.set_time_evaluate(kprof::v1::TimeEvaluateResponse().SerializeAsString());
  AttachOutput(taken, &ok);
  kprof::v1::TimeEvaluateResponse result;
  ASSERT_TRUE(result.ParseFromString(ok.time_evaluate()));
  EXPECT_EQ(result.output().tail(), taken.tail);
  EXPECT_EQ(result.output().bytes(), 19);
}

}  // namespace
}  // namespace kprof::server

// JsonLine writes what nlohmann::json's dump() writes for the same values; JsonToMessage reads
// a job line's options as protobuf's JSON parser does, faster where it may.
#include "client/cli/json_line.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "client/cli/json_input.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::client {
namespace {

using Json = nlohmann::ordered_json;

TEST(JsonLine, WritesWhatDumpWrites) {
  const std::vector<double> numbers = {0.0,    -0.0,     1.0,  6.000000000000001e-08, 1e21,
                                       1e-300, 123.456,  -2.5, 434854155054.808,      1e15,
                                       1e16,   0.000123, 3e-5};
  const std::string text = std::string("quote \" slash \\ tab \t nl \n cr \r bell \x07 del \x7f ") +
                           "esc \x1b unicode é ✓ ctl \x1f";
  JsonLine line;
  line.Open().Key("numbers").Numbers(numbers).Key("text").String(text).Key(text).Integer(-7);
  line.Key("ints").Integers(std::vector<int64_t>{0, -1, std::numeric_limits<int64_t>::max()});
  line.Key("flags").OpenArray().Bool(true).Bool(false).Null().CloseArray();
  line.Key("nan").Number(std::nan("")).Key("inf").Number(-INFINITY);
  line.Key("nested").Open().Key("a").Strings(std::vector<std::string>{"x", ""}).Close();
  line.Key("empty").Open().Close().Key("none").OpenArray().CloseArray().Close();

  Json expected = {{"numbers", numbers}, {"text", text}, {text, -7}};
  expected["ints"] = std::vector<int64_t>{0, -1, std::numeric_limits<int64_t>::max()};
  expected["flags"] = {true, false, nullptr};
  expected["nan"] = nullptr;
  expected["inf"] = nullptr;
  expected["nested"] = {{"a", {"x", ""}}};
  expected["empty"] = Json::object();
  expected["none"] = Json::array();
  EXPECT_EQ(line.text(), expected.dump());
}

// Each line read both ways gives the same message, or the same refusal.
TEST(JsonToMessage, ReadsAsProtobufsParserReads) {
  for (
      const char* text : {
          R"({"number": 3, "repeat": 5, "min_repeat_ms": 2.5, "checksums": true})",
          R"({"minRepeatMs": 1, "device": "cpu:0", "priority": "PRIORITY_BATCH"})",
          R"({"max_relative_stddev": 0.01, "outlier_filter": "iqr", "seed": 18446744073709551615})",
          R"({"cache_flush_bytes": "1024", "repeat": 2.0, "priority": 2})",
          R"({"call": {"function": "nop", "args": ["int64:1", "float32[4]"]}})",
      }) {
    const Json json = Json::parse(text);
    kprof::v1::TimeEvaluateRequest fast, slow;
    ASSERT_TRUE(JsonToMessage(json, &fast).ok()) << text;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text, &slow).ok()) << text;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(fast, slow))
        << text << "\n"
        << fast.DebugString() << "\n"
        << slow.DebugString();
  }
  kprof::v1::FunctionCall call;
  ASSERT_TRUE(JsonToMessage(Json::parse(R"({"function": "f", "args": ["a", "b"]})"), &call).ok());
  EXPECT_EQ(call.args_size(), 2);
  for (const char* text :
       {R"({"repet": 3})", R"({"seed": -1})", R"({"repeat": "x"})",
        R"({"priority": "PRIORITY_NONE"})", R"({"repeat": 9223372036854775808})"}) {
    kprof::v1::TimeEvaluateRequest fast, slow;
    const absl::Status read = JsonToMessage(Json::parse(text), &fast);
    const auto parsed = google::protobuf::util::JsonStringToMessage(text, &slow);
    EXPECT_FALSE(read.ok()) << text;
    EXPECT_EQ(read.message(), parsed.message().ToString()) << text;
  }
}

}  // namespace
}  // namespace kprof::client

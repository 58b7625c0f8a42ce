// kprof's checked measurements against a real kprofd: --reference and --expect on `time`, the
// verdict in every rendering, a wrong answer's exit status, and batch lines with references.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli.h"
#include "cli_fixture.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "temp_dir.h"

namespace kprof {
namespace {

using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

using Result = ::kprof::testing::CliResult;

class CliCheckTest : public CliTest {
 protected:
  std::string Add(const std::string& function) const {
    const std::string m = TestModulePath("answers");
    return absl::StrCat("time ", m, " ", function,
                        " --arg float32[1000] --arg float32[1000]:random "
                        "--arg float32[1000]:random --repeat 2 --reference ",
                        m, ":add_ref");
  }
  // A .npy file (format 1.0) of float32 values, shape (n,).
  std::string WriteNpy(const std::string& name, const std::vector<float>& values,
                       const std::string& descr = "<f4") const {
    std::string header = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (",
                                      values.size(), ",), }");
    header.append(63 - (10 + header.size()) % 64, ' ');
    header += '\n';
    std::string bytes = "\x93NUMPY\x01";
    bytes += '\0';
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    bytes += header;
    bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
};

TEST_F(CliCheckTest, ARightAnswerShowsItsVerdictInEveryFormat) {
  const Result table = Kprof(Add("add_honest"));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("check: passed against "));
  const Result json = Kprof(Add("add_honest") + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["check"]["outcome"], "passed");
  EXPECT_EQ(parsed["check"]["outputs"], nlohmann::json::array({0}));
  EXPECT_EQ(parsed["results"].size(), 2u);
  const Result csv = Kprof(Add("add_honest") + " --format csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_THAT(csv.out, HasSubstr("repeat,seconds_per_call,number,check\n1,"));
  EXPECT_THAT(csv.out, HasSubstr(",passed\n"));
}

TEST_F(CliCheckTest, AWrongAnswerFailsWithNoTime) {
  for (const char* function : {"add_nothing", "add_minus", "add_writes_input"}) {
    SCOPED_TRACE(function);
    const Result r = Kprof(Add(function) + " --format json");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, HasSubstr("kprof: ABORTED: wrong answer: function '"));
  }
  const Result loose = Kprof(Add("add_off") + " --atol 0.002 --format json");
  ASSERT_EQ(loose.exit_code, 0) << loose.err;
  // Google Benchmark's JSON marks the run in error.
  const Result gbench = Kprof(Add("add_half") + " --format gbench");
  EXPECT_EQ(gbench.exit_code, 1);
  const auto document = nlohmann::json::parse(gbench.out);
  ASSERT_EQ(document["benchmarks"].size(), 1u);
  EXPECT_EQ(document["benchmarks"][0]["error_occurred"], true);
  EXPECT_THAT(document["benchmarks"][0]["error_message"].get<std::string>(),
              HasSubstr("wrong answer"));
}

// kprof profile: --reference on one function; a sequence file's calls with checks of their own.
TEST_F(CliCheckTest, ProfileChecksAFunctionAndASequencesCalls) {
  const std::string m = TestModulePath("answers");
  const std::string args =
      " --arg float32[1000] --arg float32[1000]:random --arg float32[1000]:random";
  const Result one =
      Kprof(absl::StrCat("profile ", m, " add_honest", args, " --reference ", m, ":add_ref"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("check: passed against "));
  const Result wrong =
      Kprof(absl::StrCat("profile ", m, " add_half", args, " --reference ", m, ":add_ref"));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("wrong answer: function 'add_half'"));

  const std::string call = absl::StrCat(
      R"({"module": ")", m, R"(", "args": ["float32[100]", "float32[100]:random", )",
      R"("float32[100]:random"], "reference": {"module": ")", m, R"(", "function": "add_ref"}, )");
  const std::string sequence = dir_.path() + "/sequence.json";
  std::ofstream(sequence) << R"({"calls": [{"module": "builtin", "function": "copy", "args": )"
                          << R"(["float32[8]", "float32[8]:random"]}, )" << call
                          << R"("function": "add_honest"}]})";
  const Result json = Kprof("profile --sequence " + sequence + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto document = nlohmann::json::parse(json.out);
  ASSERT_EQ(document["checks"].size(), 1u);
  EXPECT_EQ(document["checks"][0]["outcome"], "passed");
  EXPECT_EQ(document["calls"].size(), 2u);
  const Result table = Kprof("profile --sequence " + sequence);
  EXPECT_THAT(table.out, HasSubstr("call 1: check: passed against "));
  std::ofstream(sequence) << R"({"calls": [)" << call << R"("function": "add_nothing"}]})";
  const Result bad = Kprof("profile --sequence " + sequence);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("wrong answer: call 0 (function 'add_nothing')"));
  for (const std::string flags : {"--reference builtin:copy", "--rtol 0.1", "--outputs 2"}) {
    const Result refused = Kprof("profile --sequence " + sequence + " " + flags);
    EXPECT_EQ(refused.exit_code, 2) << flags;
    EXPECT_THAT(refused.err, HasSubstr("a sequence's calls name their checks in FILE.json"))
        << flags;
  }
}

TEST_F(CliCheckTest, BatchReferenceChecksTheLinesWithoutOne) {
  const std::string m = TestModulePath("answers");
  std::ofstream jobs(dir_.path() + "/plain.jsonl");
  for (const char* function : {"add_honest", "add_minus"}) {
    jobs << nlohmann::json{{"id", function},
                           {"module", m},
                           {"function", function},
                           {"args", {"float32[100]", "float32[100]:random", "float32[100]:random"}}}
                .dump()
         << "\n";
  }
  jobs.close();
  const Result batch =
      Kprof("batch " + dir_.path() + "/plain.jsonl --reference " + m + ":add_ref --rtol 0.001");
  EXPECT_EQ(batch.exit_code, 3) << batch.err;
  std::map<std::string, std::string> status;
  std::istringstream lines(batch.out);
  for (std::string line; std::getline(lines, line);) {
    const auto result = nlohmann::json::parse(line);
    status[result["id"]] = result["status"];
  }
  EXPECT_EQ(status["add_honest"], "OK");
  EXPECT_EQ(status["add_minus"], "ABORTED");
}

TEST_F(CliCheckTest, CompareRefusesAWrongAnswer) {
  const Result right = Kprof(Add("add_honest") + " --format json");
  ASSERT_EQ(right.exit_code, 0) << right.err;
  std::ofstream(dir_.path() + "/right.json") << right.out;
  auto edited = nlohmann::json::parse(right.out);
  edited["check"]["outcome"] = "wrong";
  std::ofstream(dir_.path() + "/edited.json") << edited.dump();
  const Result compare =
      Kprof("compare " + dir_.path() + "/right.json " + dir_.path() + "/edited.json");
  EXPECT_NE(compare.exit_code, 0);
  EXPECT_THAT(compare.err, HasSubstr("a wrong answer has no time to compare"));
}

TEST_F(CliCheckTest, ExpectedDataFromNpyFiles) {
  const std::string base = "time builtin fill --arg float32[4] --arg float64:2.5 --expect ";
  const Result right = Kprof(base + WriteNpy("right.npy", {2.5, 2.5, 2.5, 2.5}));
  ASSERT_EQ(right.exit_code, 0) << right.err;
  EXPECT_THAT(right.out, HasSubstr("check: passed against expected data (outputs 0;"));
  const Result wrong = Kprof(base + WriteNpy("wrong.npy", {2.5, 2.5, 3, 2.5}));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("first at index 2: got 2.5, expected 3"));
  const Result big_endian = Kprof(base + WriteNpy("be.npy", {2.5, 2.5, 2.5, 2.5}, ">f4"));
  EXPECT_EQ(big_endian.exit_code, 1);
  EXPECT_THAT(big_endian.err, HasSubstr("element type '>f4' (accepted: little-endian"));
  std::ofstream(dir_.path() + "/not.npy") << "hello";
  const Result garbage = Kprof(base + dir_.path() + "/not.npy");
  EXPECT_EQ(garbage.exit_code, 1);
  EXPECT_THAT(garbage.err, HasSubstr("not.npy is not a .npy file kprof reads"));
  const Result alone = Kprof("time builtin fill --arg float32[4] --arg float64:2.5 --rtol 0.1");
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_THAT(alone.err, HasSubstr("give --reference MODULE:FUNCTION or --expect FILE.npy"));
  const Result bad = Kprof("time builtin fill --arg float32[4] --arg float64:2.5 --reference x");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("reference 'x' is not MODULE:FUNCTION"));
}

TEST_F(CliCheckTest, BatchLinesNameWrongCandidatesAndRankOnlyRightOnes) {
  const std::string m = TestModulePath("answers");
  const std::string args =
      R"("args": ["float32[1000]", "float32[1000]:random", "float32[1000]:random"])";
  const std::string reference =
      absl::StrCat(R"("reference": {"module": ")", m, R"(", "function": "add_ref"})");
  std::ofstream jobs(dir_.path() + "/jobs.jsonl");
  for (const char* function : {"add_honest", "add_ref", "add_half", "add_nothing"}) {
    jobs << absl::StrCat(R"({"id": ")", function, R"(", "module": ")", m, R"(", "function": ")",
                         function, R"(", )", args, ", ", reference, "}\n");
  }
  jobs.close();
  const Result batch = Kprof("batch " + dir_.path() + "/jobs.jsonl");
  EXPECT_EQ(batch.exit_code, 3) << batch.err;  // some jobs failed
  int ok = 0, wrong = 0;
  std::istringstream lines(batch.out);
  for (std::string line; std::getline(lines, line);) {
    const auto result = nlohmann::json::parse(line);
    if (result["status"] == "OK") {
      ++ok;
      EXPECT_EQ(result["check"]["outcome"], "passed");
    } else {
      ++wrong;
      EXPECT_EQ(result["status"], "ABORTED");
      EXPECT_EQ(result["check"]["outcome"], "wrong");
      EXPECT_THAT(result["error"].get<std::string>(), HasSubstr("wrong answer"));
    }
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(wrong, 2);
  // A race over them ranks the right ones alone; the wrong ones are named failed, saying why.
  const Result rank = Kprof("batch " + dir_.path() + "/jobs.jsonl --rank --format json");
  EXPECT_EQ(rank.exit_code, 3) << rank.err;
  const std::string last = rank.out.substr(rank.out.rfind("{\"ranking\""));
  const auto ranking = nlohmann::json::parse(last)["ranking"];
  std::map<std::string, std::string> states;
  for (const auto& candidate : ranking["candidates"]) {
    states[candidate["name"]] = candidate["state"];
    if (candidate["state"] == "failed") {
      EXPECT_THAT(candidate["error"].get<std::string>(), HasSubstr("ABORTED: wrong answer"));
    }
  }
  EXPECT_EQ(states["add_half"], "failed");
  EXPECT_EQ(states["add_nothing"], "failed");
  EXPECT_NE(states["add_honest"], "failed");
  EXPECT_NE(states["add_ref"], "failed");
  EXPECT_TRUE(ranking["fastest"] == "add_honest" || ranking["fastest"] == "add_ref");
}

}  // namespace
}  // namespace kprof

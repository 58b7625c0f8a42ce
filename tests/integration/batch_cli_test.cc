// `kprof batch`: a result line per job, each written as its job ends.
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

using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// kprof batch writes each result as its job ends, not when the batch does: the line of a quick
// job is out while the slow job behind it still runs (the daemon has not counted it yet).
TEST_F(BatchTest, TheCliWritesEachResultAsItsJobEnds) {
  const std::string jobs = dir_.path() + "/jobs.jsonl";
  std::ofstream(jobs)
      << R"({"id": "quick", "module": "builtin", "function": "nop", "number": 1, "repeat": 1})"
      << "\n"
      << R"({"id": "slow", "module": "builtin", "function": "spin_us", "args": ["float64:1000000"], )"
         R"("number": 1, "repeat": 1})"
      << "\n";
  const auto completed = [&] {
    auto info = client_->Info();
    int64_t n = 0;
    if (info.ok()) {
      for (const auto& d : info->devices()) n += d.jobs_completed();
    }
    return n;
  };
  const int64_t before = completed();
  const std::string command = ::kprof::testing::KprofPath() + " --target " + daemon_.target() +
                              " batch " + jobs + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 65536> line{};
  ASSERT_NE(std::fgets(line.data(), static_cast<int>(line.size()), pipe), nullptr);
  const int64_t at_first_line = completed();
  const Json first = Json::parse(line.data());
  std::string rest;
  while (std::fgets(line.data(), static_cast<int>(line.size()), pipe) != nullptr) {
    rest += line.data();
  }
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_EQ(first["id"], "quick");
  EXPECT_EQ(at_first_line, before + 1) << "the first line came only once the slow job had ended";
  EXPECT_EQ(Json::parse(rest)["id"], "slow");
  EXPECT_EQ(completed(), before + 2);
}

// kprof batch: a result line per job line, malformed lines answered with their line number.
TEST_F(BatchTest, TheCliWritesAResultLinePerJob) {
  const std::string jobs = dir_.path() + "/jobs.jsonl";
  {
    std::ofstream out(jobs);
    out << R"({"id": "a", "module": "builtin", "function": "spin_us", "args": ["float64:10"], )"
           R"("number": 2, "repeat": 3})"
        << "\n"
        << R"({"id": "b", "module": ")" << TestModulePath("vector_add")
        << R"(", "function": "vadd", "args": ["float32[64]:zeros", "float32[64]:ones", )"
           R"("float32[64]:ones"], "checksums": true})"
        << "\n\n"
        << "this is not json\n"
        << R"({"id": "c", "module": "builtin", "function": "spin_us", "repet": 3})"
        << "\n"
        << R"({"id": "d", "module": "builtin", "function": "no_such"})"
        << "\n"
        << R"({"module": "builtin", "function": "spin_us"})"
        << "\n"
        // Nested a million deep: it overflowed the stack.
        << R"({"id": "e", "module": "builtin", "function": "nop", "x": )"
        << std::string(1000000, '[') << std::string(1000000, ']') << "}\n";
  }
  const auto result = ::kprof::testing::RunKprof(daemon_.target(), "batch " + jobs, dir_.path());
  EXPECT_EQ(result.exit_code, 3) << result.err;  // it ran; some jobs failed
  EXPECT_THAT(result.err, HasSubstr("5 of 7 jobs failed"));
  std::map<std::string, Json> by_id;
  std::vector<Json> lines;
  std::istringstream in(result.out);
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line);
    lines.push_back(j);
    if (j["id"].is_string()) by_id[j["id"].get<std::string>()] = j;
  }
  ASSERT_EQ(lines.size(), 7u) << result.out.substr(0, 2000);
  EXPECT_EQ(by_id.at("a")["status"], "OK");
  EXPECT_EQ(by_id.at("a")["results"].size(), 3u);
  EXPECT_EQ(by_id.at("a")["number"], 2);
  EXPECT_EQ(by_id.at("b")["status"], "OK");
  EXPECT_EQ(by_id.at("b")["checksums"].size(), 3u);
  // A line with neither number nor repeat is timed until its repeats agree, as `kprof time` is.
  EXPECT_GE(by_id.at("b")["results"].size(), 10u);
  EXPECT_TRUE(by_id.at("b").contains("converged"));
  EXPECT_GT(by_id.at("b")["number"].get<int64_t>(), 1);
  EXPECT_EQ(by_id.at("c")["status"], "INVALID_ARGUMENT");
  EXPECT_EQ(by_id.at("c")["line"], 5);
  EXPECT_THAT(by_id.at("c")["error"].get<std::string>(), HasSubstr("repet"));
  EXPECT_EQ(by_id.at("d")["status"], "NOT_FOUND");
  EXPECT_EQ(by_id.at("d")["line"], 6);
  EXPECT_EQ(by_id.at("e")["status"], "INVALID_ARGUMENT");
  EXPECT_EQ(by_id.at("e")["error"], "line 8: nests deeper than 64 levels");
  int malformed = 0;
  for (const Json& j : lines) {
    if (j["id"].is_null()) {
      ++malformed;
      EXPECT_EQ(j["status"], "INVALID_ARGUMENT");
      EXPECT_TRUE(j["line"] == 4 || j["line"] == 7) << j.dump();
    }
  }
  EXPECT_EQ(malformed, 2);
}

// kprof batch --format table: one row per job line, in the lines' order, once the batch is over
// — the measured, the one whose repeats never agreed (noisy, saying why under its row), the
// failed and the malformed — then the tally; --format csv has the same columns, in that order.
TEST_F(BatchTest, TheCliSummarisesABatchAsATable) {
  const std::string jobs = dir_.path() + "/jobs.jsonl";
  std::ofstream(jobs)
      << R"({"id": "spin", "module": "builtin", "function": "spin_us", "args": ["float64:50"], )"
         R"("number": 2, "repeat": 5})"
      << "\n"
      << R"({"id": "jitter", "module": ")" << TestModulePath("jitter")
      << R"(", "function": "spin_jitter", "args": ["float64:2000"], "number": 1, )"
         R"("max_relative_stddev": 0.0001, "min_repeats": 5, "max_time_ms": 100})"
      << "\n"
      << R"({"id": "missing", "module": "builtin", "function": "no_such"})"
      << "\n"
      << "not json\n";
  const auto table =
      ::kprof::testing::RunKprof(daemon_.target(), "batch --format table " + jobs, dir_.path());
  EXPECT_EQ(table.exit_code, 3) << table.err;
  std::vector<std::string> lines;
  std::istringstream in(table.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 8u) << table.out;
  EXPECT_THAT(lines[0], ::testing::MatchesRegex("id +call +median +relative std +repeats +status"));
  EXPECT_THAT(lines[1],
              ::testing::MatchesRegex("spin +spin_us float64:50 +[0-9.]+ us +[0-9.]+% +5 +OK"));
  EXPECT_THAT(
      lines[2],
      ::testing::MatchesRegex(
          "jitter +spin_jitter float64:2000 +[0-9.]+ [mu]s +[0-9.]+% +[0-9]+ +unconverged"));
  EXPECT_THAT(lines[3], HasSubstr("(not converged: relative std"));
  EXPECT_THAT(lines[4], ::testing::MatchesRegex("missing +no_such +- +- +0 +NOT_FOUND"));
  EXPECT_THAT(lines[5], HasSubstr("no_such"));
  // The note wraps at 100 columns; the malformed line's row follows it.
  const auto malformed = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return absl::StartsWith(line, "line 4");
  });
  ASSERT_NE(malformed, lines.end()) << table.out;
  EXPECT_THAT(*malformed, ::testing::MatchesRegex("line 4 +- +- +0 +INVALID_ARGUMENT"));
  EXPECT_EQ(lines.back(), "4 jobs: 1 measured, 1 noisy (not converged or warned), 2 failed");
  for (const std::string& line : lines) EXPECT_LE(line.size(), 100u) << line;

  const auto csv =
      ::kprof::testing::RunKprof(daemon_.target(), "batch --format csv " + jobs, dir_.path());
  EXPECT_EQ(csv.exit_code, 3) << csv.err;
  std::istringstream rows(csv.out);
  std::string header, spin;
  std::getline(rows, header);
  std::getline(rows, spin);
  EXPECT_EQ(header, "id,call,median_seconds,relative_std,repeats,status,daemon,note");
  EXPECT_THAT(spin, ::testing::MatchesRegex(
                        "\"spin\",\"spin_us float64:50\",[0-9.e-]+,[0-9.e-]+,5,OK,\"\",\"\""));
}

}  // namespace
}  // namespace kprof

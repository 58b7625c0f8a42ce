// `kprof time` against a real kprofd: convergence and its defaults, the table a terminal gets,
// exact counts when they are given.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "nlohmann/json.hpp"

namespace kprof {
namespace {

using ::kprof::testing::TestModulePath;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

using Result = ::kprof::testing::CliResult;

TEST_F(CliTest, TimeConvergesAndSaysSoInJsonAndTable) {
  const Result json = Kprof(
      "time builtin spin_us --arg float64:50 --min-repeat-ms 2 --max-rel-stddev 0.5 "
      "--min-repeats 4 --max-time-ms 20000 --outliers iqr --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  if (parsed["converged"] == true) {
    EXPECT_LE(parsed["rel_stddev"].get<double>(), 0.5);
    EXPECT_EQ(parsed["stop_reason"], "converged");
  } else {
    // Only other work on the CPUs keeps a steady spin from converging (its repeats then wait
    // whole time slices or not at all), and the result says so.
    EXPECT_EQ(parsed["stop_reason"], "time budget");
    EXPECT_THAT(parsed["warnings"].dump(), ContainsRegex("busy|competed")) << json.out;
  }
  EXPECT_GE(parsed["results"].size(), 4u);
  EXPECT_TRUE(parsed["filtered"].contains("median"));
  EXPECT_TRUE(parsed["outliers"].is_array());
  EXPECT_TRUE(parsed["warnings"].is_array());
  // Without convergence, no "converged" key: a fixed repeat count says nothing about it.
  const Result fixed = Kprof("time builtin spin_us --arg float64:5 --repeat 2 --format json");
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_FALSE(nlohmann::json::parse(fixed.out).contains("converged"));
  const Result table =
      Kprof("time builtin spin_us --arg float64:50 --max-rel-stddev 0.5 --min-repeats 3");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("converged: relative std"));
  // It ends with the repeats' histogram: a bar per bin from the fastest to the slowest.
  const Result spread = Kprof("time builtin spin_us --arg float64:50 --repeat 6");
  ASSERT_EQ(spread.exit_code, 0) << spread.err;
  // (The far-out repeats after it, or beneath it where the line would pass 100 columns.)
  const size_t at = spread.out.rfind("\nrepeats  ");
  ASSERT_NE(at, std::string::npos) << spread.out;
  const std::string last = spread.out.substr(at + 1);
  EXPECT_THAT(last, MatchesRegex("repeats  .+  [0-9.]+ us \\.\\. [0-9.]+ us \\([4-6] in [4-6] bins"
                                 "((; |\\)\n {9})[12] far (above|below), (up|down) to [0-9.]+ "
                                 "us)*\\)?\n"));
  EXPECT_THAT(last, HasSubstr("█"));  // the fullest bin
  // A repeat 100 times as long as the rest is counted apart, not drawn beside them.
  const Result stalls = Kprof("time " + TestModulePath("jitter") +
                              " spin_stall --arg float64:100 --arg int64:6 --number 1 --repeat 12");
  ASSERT_EQ(stalls.exit_code, 0) << stalls.err;
  // (The units follow the times: a busy host stretches the kept ones into milliseconds.)
  // (On a line of its own beneath where the line would pass 100 columns.)
  EXPECT_THAT(stalls.out, MatchesRegex("(.|\n)*repeats  .+ [mun]?s \\(([0-9]+) in [0-9]+ bins"
                                       "(; |\\)\n {9})[0-9]+ far above, up to [0-9.]+ [mun]?s"
                                       "\\)?\n"));
  // With a fixed count the convergence options mean nothing, and saying so beats ignoring them.
  const Result alone = Kprof("time builtin spin_us --arg float64:5 --repeat 2 --min-repeats 3");
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_THAT(alone.err, HasSubstr("INVALID_ARGUMENT: min_repeats and max_time_ms apply only"));
}

// What one repeat of a result lasted: its calls times its seconds per call.
std::vector<double> RepeatSeconds(const nlohmann::json& result) {
  std::vector<double> seconds;
  for (size_t i = 0; i < result["results"].size(); ++i) {
    seconds.push_back(result["results"][i].get<double>() * result["numbers"][i].get<double>());
  }
  return seconds;
}

TEST_F(CliTest, TimeByDefaultRepeatsUntilTheRepeatsAgreeWithinABudget) {
  // A kernel of known cost: 200 us a call, so a repeat of 1 ms or more holds five calls or more.
  const Result spin = Kprof("time builtin spin_us --arg float64:200 --format json");
  ASSERT_EQ(spin.exit_code, 0) << spin.err;
  const auto result = nlohmann::json::parse(spin.out);
  ASSERT_GE(result["results"].size(), 10u) << spin.out;
  EXPECT_TRUE(result.contains("converged"));
  EXPECT_THAT(result["stop_reason"].get<std::string>(),
              ::testing::AnyOf("converged", "time budget"));
  EXPECT_NEAR(result["median"].get<double>(), 200e-6, 60e-6);
  // Every repeat lasts the 1 ms floor: five calls or more, or fewer where a busy host stretched
  // them (a first call preempted for 1 ms is a whole repeat of one).
  const std::vector<double> repeats = RepeatSeconds(result);
  int64_t most_calls = 0;
  for (size_t i = 0; i < repeats.size(); ++i) {
    EXPECT_GE(repeats[i], 0.9e-3) << "repeat " << i;
    most_calls = std::max(most_calls, result["numbers"][i].get<int64_t>());
  }
  EXPECT_GE(most_calls, 5) << spin.out;
  // The timed repeats fit the 1 s budget: none begins after it has passed.
  double timed = 0;
  for (double s : repeats) timed += s;
  EXPECT_LE(timed, 1.0 + *std::max_element(repeats.begin(), repeats.end()));
  // The table says how it stopped.
  const Result table = Kprof("time builtin spin_us --arg float64:50");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, MatchesRegex("(.|\n)*(converged|NOT converged): relative std [0-9.]+% "
                                      "after [0-9]+ repeats(.|\n)*"));
  // Options given beside the default keep their values: a budget of 5 ms ends it early.
  const Result short_budget = Kprof(
      "time builtin spin_us --arg float64:200 --max-rel-stddev 1e-9 --max-time-ms 5 "
      "--format json");
  ASSERT_EQ(short_budget.exit_code, 0) << short_budget.err;
  const auto cut = nlohmann::json::parse(short_budget.out);
  EXPECT_EQ(cut["stop_reason"], "time budget");
  EXPECT_LT(cut["results"].size(), 10u);
}

// The table of `kprof time` fits a terminal: 100 columns, the call as given (scalars' values
// too), times in a unit that suits them, one spread, the environment in one line unless asked.
TEST_F(CliTest, TheTimeTableFitsATerminal) {
  const Result nop = Kprof("time builtin nop");
  ASSERT_EQ(nop.exit_code, 0) << nop.err;
  std::istringstream lines(nop.out);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    // Characters, not bytes: the histogram's bars are three bytes each.
    size_t columns = 0;
    for (unsigned char c : line) columns += (c & 0xc0) != 0x80;
    EXPECT_LE(columns, 100u) << line;
  }
  EXPECT_LE(count, 14) << nop.out;  // many repeats are not listed one a line
  EXPECT_THAT(nop.out, MatchesRegex("nop on cpu:0\n  median [0-9.]+ ns (.|\n)*"));
  EXPECT_THAT(nop.out, HasSubstr(" relative std "));
  EXPECT_THAT(nop.out, Not(HasSubstr(" cv ")));
  EXPECT_THAT(nop.out, Not(HasSubstr("throughput")));  // no tensors, no bytes to speak of
  EXPECT_THAT(nop.out, MatchesRegex("(.|\n)*\n  environment: [^\n]+ CPUs \\(--environment: all "
                                    "[0-9]+\\)\n(.|\n)*"));
  const Result spin = Kprof("time builtin spin_us --arg float64:110 --repeat 3 --environment");
  ASSERT_EQ(spin.exit_code, 0) << spin.err;
  EXPECT_THAT(spin.out,
              MatchesRegex("spin_us float64:110 on cpu:0\n  repeat 1: 1[0-9][0-9]\\.[0-9]+ "
                           "us per call \\(1 calls\\)\n(.|\n)*"));
  EXPECT_THAT(spin.out, HasSubstr("\nEnvironment\n-----------\nCPU"));
}

TEST_F(CliTest, NumberOrRepeatGivenTimesExactlyThat) {
  const Result repeats = Kprof("time builtin spin_us --arg float64:20 --repeat 3 --format json");
  ASSERT_EQ(repeats.exit_code, 0) << repeats.err;
  const auto three = nlohmann::json::parse(repeats.out);
  EXPECT_EQ(three["numbers"], nlohmann::json::array({1, 1, 1}));
  EXPECT_FALSE(three.contains("converged"));
  const Result calls = Kprof("time builtin spin_us --arg float64:20 --number 7 --format json");
  ASSERT_EQ(calls.exit_code, 0) << calls.err;
  EXPECT_EQ(nlohmann::json::parse(calls.out)["numbers"], nlohmann::json::array({7}));
}

}  // namespace
}  // namespace kprof

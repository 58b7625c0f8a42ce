// kprof compare over the files kprof time and kprof batch write (from a real kprofd) and over
// Google Benchmark's JSON: verdicts on kernels of known cost, matching, formats, exit status,
// and the errors a wrong file gets.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "nlohmann/json.hpp"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using Result = ::kprof::testing::CliResult;

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache")); }

  Result Kprof(const std::string& args) {
    return ::kprof::testing::RunKprof(daemon_.target(), args, dir_.path());
  }

  // `kprof time builtin spin_us` of `us` microseconds, `repeat` repeats, as JSON in a file.
  std::string TimeSpin(const std::string& name, int us, int repeat) {
    const std::string path = dir_.path() + "/" + name + ".json";
    const Result r = Kprof("time builtin spin_us --arg float64:" + std::to_string(us) +
                           " --repeat " + std::to_string(repeat) + " --format json > " + path);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  TempDir dir_;
  Daemon daemon_;
};

// Kernels of known cost: a spin of 230 us against one of 200 us is 15% slower, two spins of
// 200 us are the same; a gate of 5% fails the first with exit 4, naming it. (The verdicts of
// these tests are on whatever this host did meanwhile: --accept-noisy; NoiseTest tests the
// noise.)
TEST_F(CompareTest, TellsASlowerKernelFromTheSameOne) {
  const std::string base = TimeSpin("base", 200, 20);
  const std::string same = TimeSpin("same", 200, 20);
  const std::string slower = TimeSpin("slower", 230, 20);

  const Result worse = Kprof("compare " + base + " " + slower + " --format json --accept-noisy");
  ASSERT_EQ(worse.exit_code, 0) << worse.err;
  const Json w = Json::parse(worse.out);
  ASSERT_EQ(w["comparisons"].size(), 1u);
  const Json& c = w["comparisons"][0];
  EXPECT_EQ(c["verdict"], "slower");
  EXPECT_NEAR(c["change"].get<double>(), 0.15, 0.03);
  // Holds it, ends included: the medians of resamples of steady repeats often are the median.
  EXPECT_LE(c["interval"][0].get<double>(), c["change"].get<double>());
  EXPECT_GE(c["interval"][1].get<double>(), c["change"].get<double>());
  EXPECT_GT(c["interval"][0].get<double>(), 0.1);
  EXPECT_LT(c["p_value"].get<double>(), 0.01);  // 20 against 20 (a busy host may overlap a few)
  EXPECT_EQ(c["base"]["repeats"], 20);
  EXPECT_NEAR(c["base"]["median"].get<double>(), 200e-6, 10e-6);
  EXPECT_EQ(w["summary"]["slower"], 1);

  // Two runs of one kernel on a shared host may differ by a few percent: judged the same within
  // a 5% threshold (the default 1% suits runs on a quiet, pinned host).
  const Result steady =
      Kprof("compare " + base + " " + same + " --format json --threshold 5 --accept-noisy");
  ASSERT_EQ(steady.exit_code, 0) << steady.err;
  EXPECT_EQ(Json::parse(steady.out)["comparisons"][0]["verdict"], "same");

  const Result faster = Kprof("compare " + slower + " " + base + " --accept-noisy");
  ASSERT_EQ(faster.exit_code, 0) << faster.err;
  EXPECT_THAT(faster.out, HasSubstr("faster"));
  EXPECT_THAT(faster.out, HasSubstr("1 faster, 0 slower"));

  const Result gated =
      Kprof("compare " + base + " " + slower + " --fail-on-regression 5 --accept-noisy");
  EXPECT_EQ(gated.exit_code, 4);
  EXPECT_THAT(gated.out, HasSubstr("slower"));  // the table still comes out
  EXPECT_THAT(gated.err, HasSubstr("FAILED_PRECONDITION: 1 of 1 measurements slower by more "
                                   "than 5%: base.json -> slower.json (+"));
  const Result lenient =
      Kprof("compare " + base + " " + slower + " --fail-on-regression 40 --accept-noisy");
  EXPECT_EQ(lenient.exit_code, 0) << lenient.err;
  const Result steady_gate = Kprof("compare " + base + " " + same +
                                   " --fail-on-regression 0 --threshold 5 --accept-noisy");
  EXPECT_EQ(steady_gate.exit_code, 0) << steady_gate.err;
}

// Ids come from whoever wrote the files: a terminal's control characters in one are written
// out, never sent raw (a row must not be able to clear the screen or forge other rows).
TEST_F(CompareTest, ControlCharactersInIdsNeverReachTheTerminalRaw) {
  std::string line = R"({"id": "\u001b[2J\rforged\u0007", "status": "OK", "results": [)";
  for (int i = 0; i < 20; ++i) absl::StrAppend(&line, i ? ", " : "", 1e-6 * (1 + i % 3));
  line += "]}\n";
  const std::string a = Write("a.jsonl", line), b = Write("b.jsonl", line);
  for (const char* format : {"table", "csv"}) {
    const Result compare = Kprof(absl::StrCat("compare ", a, " ", b, " --format ", format));
    EXPECT_EQ(compare.exit_code, 0) << compare.err;
    EXPECT_THAT(compare.out, HasSubstr("\\x1b[2J\\x0dforged\\x07")) << format;
    for (char raw : {'\x1b', '\r', '\x07'}) {
      EXPECT_EQ(compare.out.find(raw), std::string::npos) << format << " " << int{raw};
    }
  }
  const Result rank = Kprof(absl::StrCat("rank ", a));
  EXPECT_EQ(rank.out.find('\x1b'), std::string::npos) << rank.out;
  EXPECT_EQ(rank.err.find('\x1b'), std::string::npos) << rank.err;
}

TEST_F(CompareTest, TooFewRepeatsAreInsufficient) {
  const std::string base = TimeSpin("few", 200, 3);
  const std::string fresh = TimeSpin("more", 300, 20);
  const Result r = Kprof("compare " + base + " " + fresh + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  EXPECT_EQ(header,
            "name,verdict,change,interval_low,interval_high,p_value,base_repeats,"
            "base_median_seconds,new_repeats,new_median_seconds,noise");
  EXPECT_THAT(row, ::testing::StartsWith("\"few.json -> more.json\",insufficient,"));
  EXPECT_THAT(row, HasSubstr(",,,,3,"));  // no interval and no p: too few to say
  // With --min-repeats 3 the three say something. (Written repeats: of three measured ones, one
  // preempted on a busy host would be a third of the bootstrap's draws, and could hide any change.)
  const std::string three = Write("three.json", R"({"results": [2.0e-4, 2.01e-4, 1.99e-4]})");
  std::string twenty = R"({"results": [3.0e-4)";
  for (int i = 1; i < 20; ++i) twenty += ", " + std::to_string(3.0e-4 + 1e-7 * (i % 5));
  const std::string slower = Write("twenty.json", twenty + "]}");
  const Result fewer = Kprof("compare " + three + " " + slower + " --min-repeats 3 --format json");
  ASSERT_EQ(fewer.exit_code, 0) << fewer.err;
  EXPECT_EQ(Json::parse(fewer.out)["comparisons"][0]["verdict"], "slower");
}

// Two runs of a batch: matched by job id, each job's verdict its own; a job that failed in one
// run is insufficient, saying why; ids in one run alone are counted. Then a run with other ids
// is matched by module, function and arguments.
TEST_F(CompareTest, BatchLinesAreMatchedByIdElseByCall) {
  const auto jobs = [&](const std::string& name, const std::string& prefix, int second_us,
                        const std::string& extra) {
    std::ostringstream text;
    for (const auto& [id, us] :
         std::vector<std::pair<std::string, int>>{{"a", 100}, {"b", second_us}, {"c", 150}}) {
      text << R"({"id": ")" << prefix << id
           << R"(", "module": "builtin", "function": "spin_us", "args": ["float64:)" << us
           << R"("], "repeat": 12})"
           << "\n";
    }
    text << extra;
    const std::string jobs_path = Write(name + ".jsonl", text.str());
    const std::string out = dir_.path() + "/" + name + ".out.jsonl";
    const Result r = Kprof("batch " + jobs_path + " > " + out);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.err;
    return out;
  };
  const std::string base = jobs("base", "", 200, "");
  const std::string fresh =
      jobs("new", "", 260,
           R"({"id": "gone", "module": "builtin", "function": "no_such_function"})"
           "\n"
           R"({"id": "extra", "module": "builtin", "function": "nop"})"
           "\n");
  const std::string base_with_gone = Write(
      "base_gone.jsonl",
      kprof::testing::ReadFileBytes(base) +
          R"({"id": "gone", "module": "builtin", "function": "spin_us", "args": ["float64:1"], )"
          R"("results": [1e-6, 1e-6, 1e-6, 1e-6, 1e-6], "status": "OK"})"
          "\n");
  // Runs apart on a shared host: the same within 5% (b is 30% slower).
  const Result r = Kprof("compare " + base_with_gone + " " + fresh +
                         " --format json --threshold 5 --accept-noisy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  std::map<std::string, Json> by_name;
  for (const Json& c : j["comparisons"]) by_name[c["name"].get<std::string>()] = c;
  ASSERT_EQ(by_name.size(), 4u) << r.out;
  EXPECT_EQ(by_name["a"]["verdict"], "same");
  EXPECT_EQ(by_name["b"]["verdict"], "slower");
  EXPECT_NEAR(by_name["b"]["change"].get<double>(), 0.30, 0.05);
  EXPECT_EQ(by_name["c"]["verdict"], "same");
  EXPECT_EQ(by_name["gone"]["verdict"], "insufficient");
  EXPECT_THAT(by_name["gone"]["error"].get<std::string>(), HasSubstr("new: NOT_FOUND"));
  EXPECT_EQ(j["new_only"], Json::array({"extra"}));
  EXPECT_EQ(j["base_only"], Json::array());

  const std::string renamed = jobs("renamed", "x-", 200, "");
  const Result by_call =
      Kprof("compare " + base + " " + renamed + " --format json --threshold 5 --accept-noisy");
  ASSERT_EQ(by_call.exit_code, 0) << by_call.err;
  const Json k = Json::parse(by_call.out);
  ASSERT_EQ(k["comparisons"].size(), 3u) << by_call.out;
  EXPECT_EQ(k["comparisons"][1]["name"], "b -> x-b");
  EXPECT_EQ(k["comparisons"][1]["verdict"], "same");
}

// Google Benchmark's JSON: repetitions are the repeats, aggregates are skipped, times are read
// in their unit; a benchmark with one run is insufficient.
TEST_F(CompareTest, ReadsGoogleBenchmarkJson) {
  const auto file = [&](const std::string& name, double scale) {
    Json runs = Json::array();
    for (int i = 0; i < 10; ++i) {
      runs.push_back({{"name", "BM_copy/64"},
                      {"run_name", "BM_copy/64"},
                      {"run_type", "iteration"},
                      {"repetitions", 10},
                      {"iterations", 1000},
                      {"real_time", scale * (812.0 + (i % 3))},
                      {"cpu_time", 800.0},
                      {"time_unit", "us"}});
      runs.push_back({{"name", "BM_nop"},
                      {"run_name", "BM_nop"},
                      {"run_type", "iteration"},
                      {"real_time", 3.0 + (i % 2) * 0.01},
                      {"time_unit", "ns"}});
    }
    runs.push_back({{"name", "BM_copy/64_mean"},
                    {"run_name", "BM_copy/64"},
                    {"run_type", "aggregate"},
                    {"aggregate_name", "mean"},
                    {"real_time", 1e9},
                    {"time_unit", "us"}});
    runs.push_back(
        {{"name", "BM_once"}, {"run_type", "iteration"}, {"real_time", 5.0}, {"time_unit", "ms"}});
    return Write(name, Json{{"context", {{"num_cpus", 2}}}, {"benchmarks", runs}}.dump(2));
  };
  const Result r = Kprof("compare " + file("gb_base.json", 1.0) + " " + file("gb_new.json", 0.9) +
                         " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["comparisons"].size(), 3u);
  EXPECT_EQ(j["comparisons"][0]["name"], "BM_copy/64");
  EXPECT_EQ(j["comparisons"][0]["verdict"], "faster");
  EXPECT_NEAR(j["comparisons"][0]["base"]["median"].get<double>(), 813e-6, 1e-9);
  EXPECT_EQ(j["comparisons"][0]["base"]["repeats"], 10);  // the aggregate is not a repeat
  EXPECT_NEAR(j["comparisons"][0]["change"].get<double>(), -0.1, 1e-9);
  EXPECT_EQ(j["comparisons"][1]["verdict"], "same");
  EXPECT_EQ(j["comparisons"][2]["name"], "BM_once");
  EXPECT_EQ(j["comparisons"][2]["verdict"], "insufficient");
}

// `--format gbench` as Google Benchmark's own compare.py (Debian's libbenchmark-tools) reads
// it: two candidates of one entry point (gemm sleeps 2 ms in candidate_1, 4 ms in candidate_2),
// timed by kprof time and by kprof batch, are one benchmark to compare.py, which finds the
// second slower with a U test, as kprof compare does on the same files.
TEST_F(CompareTest, GoogleBenchmarksComparePyReadsTheGbenchFormat) {
  const auto time = [&](int k) {
    const std::string path = dir_.path() + "/gb" + std::to_string(k) + ".json";
    const Result r =
        Kprof("time " + ::kprof::testing::TestModulePath(absl::StrCat("candidate_", k)) +
              " gemm --repeat 10 --format gbench > " + path);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  };
  const auto batch = [&](int k) {
    const std::string jobs = Write(
        "gbjobs" + std::to_string(k) + ".jsonl",
        absl::StrCat(R"({"id": "cand", "module": ")",
                     ::kprof::testing::TestModulePath(absl::StrCat("candidate_", k)),
                     R"(", "function": "gemm", "repeat": 10})", "\n",
                     R"({"id": "broken", "module": "builtin", "function": "no_such"})", "\n"));
    const std::string path = dir_.path() + "/gbbatch" + std::to_string(k) + ".json";
    const Result r = Kprof("batch " + jobs + " --format gbench > " + path);
    EXPECT_EQ(r.exit_code, 3) << r.err;  // the broken job failed
    return path;
  };
  for (const auto& [base, fresh, name] :
       {std::tuple{time(1), time(2), std::string("gemm")},
        std::tuple{batch(1), batch(2), std::string("cand/gemm")}}) {
    const Json doc = Json::parse(kprof::testing::ReadFileBytes(base));
    EXPECT_EQ(doc["context"]["executable"], "kprof");
    EXPECT_TRUE(doc["context"]["kprof_environment"].contains("kprofd version"));
    int iterations = 0, aggregates = 0;
    for (const Json& run : doc["benchmarks"]) {
      if (run["name"] == name) ++iterations;
      if (run["run_name"] == name && run["run_type"] == "aggregate") ++aggregates;
    }
    EXPECT_EQ(iterations, 10) << doc.dump(1);
    EXPECT_EQ(aggregates, 4);  // mean, median, stddev, cv

    const std::string dump = dir_.path() + "/compare_py.json";
    const int py = std::system(("/usr/bin/python3 /usr/share/benchmark/compare.py --no-color -d " +
                                dump + " benchmarks " + base + " " + fresh + " > /dev/null")
                                   .c_str());
    ASSERT_EQ(py, 0) << "compare.py failed";
    const Json report = Json::parse(kprof::testing::ReadFileBytes(dump));
    bool median_seen = false, utest_seen = false;
    for (const Json& entry : report) {
      if (entry["name"] == name + "_median") {
        median_seen = true;
        EXPECT_GT(entry["measurements"][0]["time"].get<double>(), 0.5);  // some +100%
      }
      if (entry["name"] == name && entry["utest"].contains("time_pvalue")) {
        utest_seen = true;
        EXPECT_LT(entry["utest"]["time_pvalue"].get<double>(), 0.05);
      }
    }
    EXPECT_TRUE(median_seen) << report.dump(1);
    EXPECT_TRUE(utest_seen) << report.dump(1);

    const Result ours = Kprof("compare " + base + " " + fresh + " --format json");
    ASSERT_EQ(ours.exit_code, 0) << ours.err;
    const Json mine = Json::parse(ours.out);
    bool found = false;
    for (const Json& c : mine["comparisons"]) {
      if (c["name"] != name) continue;
      found = true;
      EXPECT_EQ(c["verdict"], "slower");
    }
    EXPECT_TRUE(found) << ours.out;
  }
  const Result refused = Kprof("info --format gbench");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("--format gbench is for time and batch"));
}

// A ranking race over modules that share one entry point: candidate_1 twice (under two ids, a
// tie by construction), candidate_2 and candidate_3 (2 and 4 ms slower). The race finds the two
// as the tie set and stops the losers after the first round; had the daemon run one module's
// code for another, the losers would tie too. Each candidate's line carries all its repeats,
// the last line the ranking, and kprof rank and kprof compare read the output.
TEST_F(CompareTest, ARankRaceFindsTheTieSetAndStopsTheLosersEarly) {
  std::ostringstream text;
  for (const auto& [id, module] :
       std::vector<std::pair<std::string, std::string>>{{"one", "candidate_1"},
                                                        {"two", "candidate_2"},
                                                        {"again", "candidate_1"},
                                                        {"three", "candidate_3"}}) {
    text << R"({"id": ")" << id << R"(", "module": ")" << testing::TestModulePath(module)
         << R"(", "function": "gemm"})"
         << "\n";
  }
  const std::string jobs = Write("rank.jsonl", text.str());
  const std::string out = dir_.path() + "/rank.out.jsonl";
  const Result r = Kprof("batch " + jobs + " --rank --threshold 5 --rank-max-repeats 40 > " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<Json> lines;
  std::istringstream in(testing::ReadFileBytes(out));
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
  ASSERT_EQ(lines.size(), 5u);
  const Json& ranking = lines.back()["ranking"];
  std::vector<std::string> ties = ranking["ties"];
  std::sort(ties.begin(), ties.end());
  EXPECT_EQ(ties, (std::vector<std::string>{"again", "one"})) << ranking.dump();
  std::map<std::string, Json> by_name;
  for (const Json& c : ranking["candidates"]) by_name[c["name"].get<std::string>()] = c;
  for (const char* loser : {"two", "three"}) {
    EXPECT_EQ(by_name[loser]["state"], "slower") << loser;
    EXPECT_LE(by_name[loser]["repeats"].get<int>(), 15) << loser;  // the plan's first steps
  }
  // candidate_K takes 2K ms: two is +100%, three +200% of one.
  // Wide enough for a CI machine busy with another test; a tie (the wrong kernel) would read 0.
  EXPECT_NEAR(by_name["two"]["change"].get<double>(), 1.0, 0.3);
  EXPECT_NEAR(by_name["three"]["change"].get<double>(), 2.0, 0.5);
  EXPECT_NEAR(by_name["one"]["median"].get<double>(), 2e-3, 0.3e-3);
  EXPECT_EQ(ranking["confidence"], 0.95);
  EXPECT_EQ(ranking["threshold"], 0.05);
  size_t total = 0;
  for (size_t i = 0; i < 4; ++i) {
    const Json& line = lines[i];
    EXPECT_EQ(line["status"], "OK") << line.dump();
    const std::string name = line["id"];
    EXPECT_EQ(line["results"].size(), by_name[name]["repeats"].get<size_t>()) << name;
    EXPECT_EQ(line["repeat"], line["results"].size());
    EXPECT_EQ(line["function"], "gemm");
    total += line["results"].size();
  }
  EXPECT_EQ(ranking["repeats"].get<size_t>(), total);
  // The output ranks again (one set of repeats) and compares with itself, the ranking line
  // passed over.
  const Result again = Kprof("rank " + out + " --threshold 5 --format json --accept-noisy");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Json::parse(again.out)["ranking"]["candidates"].size(), 4u);
  const Result compared = Kprof("compare " + out + " " + out + " --format json");
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_EQ(Json::parse(compared.out)["comparisons"].size(), 4u);
  // As a table: the ranking alone.
  const Result table = Kprof("batch " + jobs +
                             " --rank --threshold 5 --rank-max-repeats 40 "
                             "--format table");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("tie set: "));
  EXPECT_THAT(table.out, HasSubstr("2 slower, 0 failed"));
}

// A race with randomized layouts: each candidate's turns go on through its layouts, so its
// repeats are not a few layouts over again, one run per turn.
TEST_F(CompareTest, ARankRaceWithRandomizedLayoutsDrawsNewOnesEachTurn) {
  std::ostringstream text;
  for (const auto& [id, n] : std::vector<std::pair<std::string, int>>{{"a", 1024}, {"b", 65536}}) {
    text << R"({"id": ")" << id << R"(", "module": "builtin", "function": "copy", "args": )"
         << R"(["float32[)" << n << R"(]:zeros", "float32[)" << n
         << R"(]:random"], "randomize_layout": true})"
         << "\n";
  }
  const std::string jobs = Write("layouts.jsonl", text.str());
  const std::string out = dir_.path() + "/layouts.out.jsonl";
  const Result r = Kprof("batch " + jobs + " --rank --threshold 5 --rank-max-repeats 30 > " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(testing::ReadFileBytes(out));
  int candidates = 0;
  for (std::string line; std::getline(in, line);) {
    const Json result = Json::parse(line);
    if (!result.contains("layouts")) continue;
    ++candidates;
    const size_t repeats = result["results"].size();
    ASSERT_EQ(result["layouts"].size(), repeats) << result["id"];  // one repeat each
    std::set<std::vector<uint64_t>> distinct;
    for (size_t l = 0; l < repeats; ++l) {
      EXPECT_EQ(result["layouts"][l]["first_repeat"], l);
      distinct.insert(result["layouts"][l]["offsets"].get<std::vector<uint64_t>>());
    }
    // A turn is 5 repeats: drawn again from the start each turn, there would be 5 at most.
    EXPECT_GT(repeats, 5u) << result["id"];
    EXPECT_GT(distinct.size(), 5u) << result["id"];
  }
  EXPECT_EQ(candidates, 2);
}

// A candidate that cannot run, a line that sets its own repeats and one that is no job at all
// fail in the ranking, naming why, and the batch exits 3; the others are ranked. A spent budget
// ends the race after its first round, undecided.
TEST_F(CompareTest, ARankRaceNamesItsFailuresAndKeepsToItsBudget) {
  const std::string jobs =
      Write("rank.jsonl",
            R"({"id": "fast", "module": "builtin", "function": "spin_us", "args": ["float64:100"]})"
            "\n"
            R"({"id": "twin", "module": "builtin", "function": "spin_us", "args": ["float64:100"]})"
            "\n"
            R"({"id": "missing", "module": "builtin", "function": "no_such_function"})"
            "\n"
            R"({"id": "own", "module": "builtin", "function": "nop", "repeat": 3})"
            "\n"
            "not json\n"
            R"({"id": "fast", "module": "builtin", "function": "nop"})"
            "\n");
  const Result r = Kprof("batch " + jobs + " --rank --format csv --threshold 0");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("4 of 6 candidates failed"));
  EXPECT_THAT(r.out, HasSubstr("\"missing\",failed,"));
  EXPECT_THAT(r.out, HasSubstr("\"own (line 4)\",failed,"));
  EXPECT_THAT(r.out, HasSubstr("\"fast (line 6)\",failed,"));  // its id is line 1's
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n\"fast\",(fastest|tied|undecided|slower),"));
  EXPECT_THAT(r.out, HasSubstr("\"line 5\",failed,"));
  const Result table =
      Kprof("batch " + jobs + " --rank --format table --threshold 0 --rank-budget 0.001");
  EXPECT_EQ(table.exit_code, 3);
  EXPECT_THAT(table.out, HasSubstr("(NOT_FOUND: "));
  EXPECT_THAT(table.out, HasSubstr("leave out \"repeat\""));
  EXPECT_THAT(table.out, HasSubstr("in 1 round,"));  // the budget allows no second
  for (const std::string& bad :
       {std::string("--rank-initial 1"), std::string("--rank-max-repeats 5"),
        std::string("--rank-budget -1"), std::string("--confidence 0"),
        std::string("--threshold 100")}) {
    const Result refused = Kprof("batch " + jobs + " --rank " + bad);
    EXPECT_EQ(refused.exit_code, 2) << bad << ": " << refused.err;
    EXPECT_THAT(refused.err, HasSubstr(bad.substr(0, bad.find(' ')))) << bad;
  }
  const Result not_batch = Kprof("time builtin nop --rank");
  EXPECT_EQ(not_batch.exit_code, 2);
  EXPECT_THAT(not_batch.err,
              HasSubstr("--rank is not an option of 'kprof time' (it is one of: batch;"));
}

// kprof rank over result files: one candidate per measurement, a name in two files refused.
TEST_F(CompareTest, RankReadsResultFiles) {
  const std::string fast = TimeSpin("fast", 100, 15);
  const std::string slow = TimeSpin("slow", 150, 15);
  const Result r =
      Kprof("rank " + slow + " " + fast + " --format json --threshold 5 --accept-noisy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out)["ranking"];
  EXPECT_EQ(j["fastest"], "fast.json");
  EXPECT_EQ(j["ties"], Json::array({"fast.json"}));
  EXPECT_EQ(j["candidates"][1]["state"], "slower");
  EXPECT_NEAR(j["candidates"][1]["change"].get<double>(), 0.5, 0.1);
  EXPECT_EQ(j["rounds"], 1);
  EXPECT_TRUE(j["seconds"].is_null());
  const Result twice = Kprof("rank " + fast + " " + fast);
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_THAT(twice.err, HasSubstr("the measurement 'fast.json' is twice in"));
  const Result none = Kprof("rank");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("FILE is required (usage: kprof rank [OPTIONS] FILE...)"));
  const Result html = Kprof("rank " + fast + " --format html");
  EXPECT_EQ(html.exit_code, 2);
}

// What a wrong file gets: a message naming it and what is accepted, exit 1; usage errors exit 2.
TEST_F(CompareTest, WrongFilesAndOptionsAreRefusedSayingWhy) {
  const std::string good = TimeSpin("good", 50, 5);
  const std::string report = Write("report.json", R"({"calls": [], "device_metrics": {}})");
  const std::string junk = Write("junk.jsonl", "{\"id\": \"a\", \"results\": [1e-6]}\nnot json\n");
  const std::string strings = Write("strings.json", R"({"results": ["fast"]})");
  const std::string other = Write("other.jsonl",
                                  "{\"id\": \"zz\", \"results\": [1e-6], "
                                  "\"status\": \"OK\"}\n{\"id\": \"yy\", "
                                  "\"results\": [1e-6], \"status\": \"OK\"}\n");
  const std::string two = Write("two.jsonl",
                                "{\"id\": \"a\", \"results\": [1e-6], \"status\": "
                                "\"OK\"}\n{\"id\": \"b\", \"results\": [1e-6], "
                                "\"status\": \"OK\"}\n");
  // Nested a million deep (it overflowed the stack) and an element of 10 MB (echoed whole).
  const std::string deep = Write(
      "deep.json", "{\"results\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}");
  const std::string deep_line = Write(
      "deep.jsonl", "{\"id\": \"a\", \"results\": [1e-6]}\n{\"x\": " + std::string(1000000, '[') +
                        std::string(1000000, ']') + "}\n");
  const std::string long_string =
      Write("long.json", "{\"results\": [\"" + std::string(10000000, 'x') + "\"]}");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good + " " + report, "is a JSON object without results"},
      {deep + " " + good, "deep.json' nests deeper than 64 levels"},
      {good + " " + deep_line, "deep.jsonl' line 2 nests deeper than 64 levels"},
      {long_string + " " + good, "xxx... (10000002 characters), not seconds per call"},
      {junk + " " + good, "line 2 is not a JSON object"},
      {strings + " " + good, "holds \"fast\", not seconds per call"},
      {dir_.path() + " " + good, "is a directory, not a result file"},
      {dir_.path() + "/missing.json " + good, "missing.json"},
      {two + " " + other, "no measurement of"},
  };
  // Times that are not positive, finite, normal numbers make a failed measurement, saying so.
  for (const char* time : {"0", "-1e-06", "1e-320"}) {
    const std::string odd = Write("odd.jsonl", absl::StrCat(R"({"id": "odd", "status": "OK", )",
                                                            R"("results": [1e-6, )", time, "]}\n"));
    const Result compare = Kprof("compare " + odd + " " + odd + " --format json");
    EXPECT_THAT(compare.out, HasSubstr("repeat 2 of 2 is not a positive, finite, normal number "
                                       "of seconds"))
        << time << ": " << compare.err;
    const Result rank = Kprof("rank " + odd + " " + good + " --format json");
    EXPECT_EQ(rank.exit_code, 0) << rank.err;
    EXPECT_THAT(rank.out, HasSubstr("repeat 2 of 2 is not a positive, finite, normal number of "
                                    "seconds"))
        << time;
  }
  for (const auto& [args, message] : cases) {
    const Result r = Kprof("compare " + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.err.substr(0, 300);
    EXPECT_LT(r.err.size(), 1000u) << args;
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
    EXPECT_THAT(r.err, ::testing::StartsWith("kprof: ")) << args;
  }
  EXPECT_THAT(Kprof("compare " + good + " " + report).err, HasSubstr("kprof batch"));
  EXPECT_THAT(Kprof("rank " + deep + " " + good).err, HasSubstr("nests deeper than 64 levels"));
  for (const std::string& bad : {std::string("--confidence 1.5"), std::string("--resamples 5"),
                                 std::string("--fail-on-regression -3"),
                                 std::string("--threshold -1"), std::string("--min-repeats 0")}) {
    const Result r = Kprof("compare " + good + " " + good + " " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(bad.substr(0, bad.find(' ')))) << bad;
  }
  EXPECT_EQ(Kprof("compare " + good).exit_code, 2);
}

}  // namespace
}  // namespace kprof

// Noise named where it is: a result measured while the host was busy says so (a real busy host,
// made by processes that spin), and kprof compare and kprof rank give no verdict on it, nor on
// repeats that did not converge, unless told to.
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli.h"
#include "cpu_hogs.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kprof {
namespace {

using ::kprof::testing::CpuHogs;
using ::kprof::testing::Daemon;
using ::kprof::testing::TempDir;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;
using Result = ::kprof::testing::CliResult;

constexpr char kBusy[] = "the host was busy: the measuring thread waited for a CPU";

class NoiseTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache")); }

  Result Kprof(const std::string& args) {
    return ::kprof::testing::RunKprof(daemon_.target(), args, dir_.path());
  }

  std::string Write(const std::string& name, const Json& json) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << json.dump() << "\n";
    return path;
  }

  // Twice as many spinning processes as CPUs, for at most a minute.
  static int Hogs() {
    return 2 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  TempDir dir_;
  Daemon daemon_;
};

TEST_F(NoiseTest, EveryResultMeasuredOnABusyHostSaysSo) {
  Result timed, batch;
  {
    CpuHogs hogs(Hogs(), 60);
    ASSERT_EQ(hogs.size(), static_cast<size_t>(Hogs()));
    timed = Kprof("time builtin spin_us --arg float64:2000 --repeat 20 --format json");
    std::ofstream(dir_.path() + "/jobs.jsonl")
        << R"({"id": "spin", "module": "builtin", "function": "spin_us", "args": ["float64:2000"],)"
        << R"( "repeat": 20})"
        << "\n";
    batch = Kprof("batch " + dir_.path() + "/jobs.jsonl");
    // And in the table: each warning on a line of its own.
    const Result table = Kprof("time builtin spin_us --arg float64:2000 --repeat 20");
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_THAT(table.out, HasSubstr(absl::StrCat("warning: ", kBusy)));
    for (absl::string_view line : absl::StrSplit(table.out, '\n')) {
      // Characters, not bytes (the histogram's bars are three bytes each): the warning wrapped
      // to fit a terminal.
      size_t columns = 0;
      for (unsigned char c : line) columns += (c & 0xc0) != 0x80;
      EXPECT_LE(columns, 100u) << line;
    }
  }
  for (const Result* r : {&timed, &batch}) {
    ASSERT_EQ(r->exit_code, 0) << r->err;
    const Json json = Json::parse(r->out);
    EXPECT_THAT(json["warnings"], Contains(StartsWith(kBusy))) << json["warnings"];
    // Half or more of each CPU was the hogs'.
    EXPECT_GT(json["cpu_wait"].get<double>(), 0.2) << r->out;
    EXPECT_LE(json["cpu_wait"].get<double>(), 1.0);
  }
}

TEST_F(NoiseTest, CompareAndRankDoNotJudgeNoisyMeasurementsUnlessTold) {
  const Result quiet = Kprof("time builtin spin_us --arg float64:200 --repeat 20 --format json");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  Json base = Json::parse(quiet.out);
  base["warnings"] = Json::array();  // whatever this host was doing meanwhile
  Json busy = base;
  busy["warnings"] = {absl::StrCat(kBusy, " 41% of the measurement")};
  for (Json& s : busy["results"]) s = s.get<double>() * 1.5;
  Json unsteady = base;
  unsteady["converged"] = false;
  unsteady["rel_stddev"] = 0.24;
  const std::string base_file = Write("base.json", base);
  const std::string busy_file = Write("busy.json", busy);
  const std::string unsteady_file = Write("unsteady.json", unsteady);

  const Result noisy = Kprof("compare " + base_file + " " + busy_file);
  ASSERT_EQ(noisy.exit_code, 0) << noisy.err;
  EXPECT_THAT(noisy.out, HasSubstr("noisy"));
  EXPECT_THAT(noisy.out, HasSubstr(absl::StrCat("(noisy: new: ", kBusy, " 41%")));
  EXPECT_THAT(noisy.out, HasSubstr("1 noisy (not judged: --accept-noisy judges them"));
  EXPECT_THAT(noisy.out, HasSubstr("change: the new median over the base's"));
  const Result json = Kprof("compare " + base_file + " " + unsteady_file + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json c = Json::parse(json.out)["comparisons"][0];
  EXPECT_EQ(c["verdict"], "noisy");
  EXPECT_EQ(c["noise"], "new: its repeats did not converge (relative std 24.0%)");

  // Told to: judged (50% slower), the noise still named.
  const Result judged =
      Kprof("compare " + base_file + " " + busy_file + " --accept-noisy --format json");
  ASSERT_EQ(judged.exit_code, 0) << judged.err;
  const Json j = Json::parse(judged.out)["comparisons"][0];
  EXPECT_EQ(j["verdict"], "slower");
  EXPECT_THAT(j["noise"].get<std::string>(), HasSubstr(kBusy));

  // A gate cannot vouch for what it did not judge.
  const Result gate = Kprof("compare " + base_file + " " + busy_file + " --fail-on-regression 5");
  EXPECT_EQ(gate.exit_code, 4);
  EXPECT_THAT(gate.err, HasSubstr("1 of 1 measurements noisy, not judged for a regression: "
                                  "base.json -> busy.json"));
  EXPECT_THAT(gate.err, HasSubstr("--accept-noisy"));

  // Rank: the busy one left out, naming why; ranked when told to.
  Json fast = busy;
  for (Json& s : fast["results"]) s = s.get<double>() / 3;  // the fastest of all
  const std::string fast_file = Write("fast_busy.json", fast);
  const Result ranked = Kprof("rank " + base_file + " " + fast_file + " --format json");
  ASSERT_EQ(ranked.exit_code, 0) << ranked.err;
  const Json r = Json::parse(ranked.out)["ranking"];
  EXPECT_EQ(r["fastest"], "base.json");
  EXPECT_EQ(r["candidates"][1]["state"], "failed");
  EXPECT_THAT(r["candidates"][1]["error"].get<std::string>(),
              StartsWith("noisy, not ranked (--accept-noisy ranks it): the host was busy"));
  const Result told =
      Kprof("rank " + base_file + " " + fast_file + " --accept-noisy --format json");
  ASSERT_EQ(told.exit_code, 0) << told.err;
  EXPECT_EQ(Json::parse(told.out)["ranking"]["fastest"], "fast_busy.json");
}

}  // namespace
}  // namespace kprof

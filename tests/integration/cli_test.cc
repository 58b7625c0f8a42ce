// The kprof binary against a real kprofd: output formats, the id alone from `load`, and the
// one-line error with the code's name.
#include "cli.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli_fixture.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "nlohmann/json.hpp"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

using Result = ::kprof::testing::CliResult;

TEST_F(CliTest, LoadPrintsTheIdAloneAndTimeUsesIt) {
  const Result load = Kprof("load " + TestModulePath("vector_add"));
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_THAT(load.out, MatchesRegex("[0-9a-f]{64}\n"));
  const std::string id = load.out.substr(0, 64);
  const Result time = Kprof("time " + id +
                            " vadd --arg float32[4]:ones --arg float32[4]:ones "
                            "--arg float32[4] --repeat 2 --format json --checksums");
  ASSERT_EQ(time.exit_code, 0) << time.err;
  const auto json = nlohmann::json::parse(time.out);
  EXPECT_EQ(json["results"].size(), 2u);
  EXPECT_EQ(json["repeat"], 2);
  EXPECT_TRUE(json.contains("median"));
  EXPECT_EQ(json["checksums"][2],
            "c3a6b1f08b0b05ac05390d6c257551ffd0cdcf40496f232b52df2498f915469e");
}

TEST_F(CliTest, AFilePathIsUploadedOnlyWhenMissing) {
  const Result first = Kprof("time " + TestModulePath("vector_add") +
                             " vadd --arg float32[4] --arg float32[4] --arg float32[4]");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("vadd float32[4], float32[4], float32[4] on cpu:0"));
  const Result modules = Kprof("modules --format csv");
  ASSERT_EQ(modules.exit_code, 0);
  EXPECT_THAT(modules.out, HasSubstr("vector_add.so"));
}

TEST_F(CliTest, ProfileTablesAndJson) {
  // For a terminal: the call as given, the total and per-call times (a spin of known cost) in
  // units that suit them, the metrics that fit in 100 columns and the names of the others.
  const Result table = Kprof(
      "profile builtin spin_us --arg float64:50 --number 3 --collector rusage "
      "--collector perf:task-clock,context-switches,page-faults");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("spin_us float64:50 on cpu:0, 3 calls a measurement\n"));
  EXPECT_THAT(table.out, HasSubstr("function  calls"));
  EXPECT_THAT(table.out, HasSubstr("per call"));
  // The spin's known cost: 50 us a call at least (a busy host stretches it), the total three
  // calls' worth, each in the unit that suits it.
  std::smatch times;
  const std::regex row("spin_us +3 +([0-9.]+) (us|ms) +([0-9.]+) (us|ms) ");
  ASSERT_TRUE(std::regex_search(table.out, times, row)) << table.out;
  const auto us = [&](int at) {
    return std::stod(times[at].str()) * (times[at + 1].str() == "ms" ? 1000 : 1);
  };
  EXPECT_GE(us(3), 50) << table.out;
  EXPECT_NEAR(us(1), 3 * us(3), 0.1 + 1e-3 * us(1)) << table.out;
  EXPECT_THAT(table.out, ::testing::ContainsRegex("more: .*--wide shows every column"));
  EXPECT_THAT(table.out, HasSubstr("  environment: "));
  EXPECT_THAT(table.out, Not(HasSubstr("Configuration")));
  for (absl::string_view line : absl::StrSplit(table.out, '\n')) {
    EXPECT_LE(line.size(), 100u) << line;
  }
  // --wide: TVM's table, every column and the configuration; --environment: all of it beneath.
  const Result wide =
      Kprof("profile builtin spin_us --arg float64:50 --number 3 --collector rusage --wide");
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_THAT(wide.out, HasSubstr("Duration (us)"));
  EXPECT_THAT(wide.out, HasSubstr("Involuntary Context Switches"));
  EXPECT_THAT(wide.out, HasSubstr("Configuration"));
  const Result all = Kprof("profile builtin spin_us --arg float64:50 --environment");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("\nEnvironment\n-----------\nCPU"));
  EXPECT_THAT(all.out, HasSubstr("\nCPU model: "));
  const Result json = Kprof("profile builtin spin_us --arg float64:50 --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["calls"][0]["Name"]["string"], "spin_us");
  // The Chrome trace event format: a slice per call of the report (the three measured calls
  // are one, of Count 3) on the device's named track.
  const Result trace = Kprof(
      "profile builtin spin_us --arg float64:50 --number 3 --collector rusage "
      "--format trace");
  ASSERT_EQ(trace.exit_code, 0) << trace.err;
  const nlohmann::json events = nlohmann::json::parse(trace.out)["traceEvents"];
  int slices = 0;
  std::string track;
  for (const auto& e : events) {
    if (e["name"] == "thread_name") track = e["args"]["name"];
    if (e["ph"] != "X") continue;
    ++slices;
    EXPECT_EQ(e["name"], "spin_us");
    EXPECT_GE(e["dur"].get<double>(), 3 * 50.0 * 0.9) << e;
    EXPECT_EQ(e["args"]["Count"], 3) << e;
    EXPECT_TRUE(e["args"].contains("User Time (us)")) << e;
  }
  EXPECT_EQ(slices, 1);
  EXPECT_EQ(track, "cpu0");
  const Result refused = Kprof("time builtin nop --format trace");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("--format trace is for profile and report"));
}

TEST_F(CliTest, ProfileASequenceFromJson) {
  const std::string file = dir_.path() + "/model.json";
  std::ofstream(file) << R"({"calls": [
      {"module": "builtin", "function": "matmul",
       "args": ["float32[16,16]", "float32[16,16]:random", "float32[16,16]:random"]},
      {"module": "builtin", "function": "saxpy",
       "args": ["float32[256]", "float32[256]:random", "float32:2"]}],
    "repeat": 2})";
  const Result r = Kprof("profile --sequence " + file + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5);  // header + 2 calls x 2 repeats
  const Result bad = Kprof("profile --sequence " + dir_.path() + "/missing.json");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("kprof: NOT_FOUND: cannot read"));
}

TEST_F(CliTest, ASequenceFileRefusesKeysItDoesNotKnowNamingThem) {
  const auto refused = [&](const std::string& json) {
    const std::string file = dir_.path() + "/seq.json";
    std::ofstream(file) << json;
    return Kprof("profile --sequence " + file);
  };
  const std::string call = R"({"module": "builtin", "function": "spin_us", "args": ["float64:1"]})";
  Result r = refused(R"({"calls": [)" + call + R"(], "repeats": 3})");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("unknown key \"repeats\" (a sequence file has \"calls\", "
                               "\"repeat\" and \"warmup\")"));
  r = refused(R"({"calls": [{"module": "builtin", "function": "spin_us", "args": ["float64:1"],
                             "number": 5}]})");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("calls[0] has an unknown key \"number\""));
  r = refused(R"({"calls": [)" + call + R"(], "repeat": "3"})");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("\"repeat\" wants a whole number, got \"3\""));
}

TEST_F(CliTest, ReportRendersAStandardJsonFile) {
  const std::string file = dir_.path() + "/report.json";
  std::ofstream(file)
      << R"json({"calls": [{"Name": {"string": "matmul"}, "Duration (us)": {"microseconds": 812.5},
            "Count": {"count": 1}, "Device": {"string": "cpu0"}}],
            "device_metrics": {}, "configuration": {}})json";
  const Result r = Kprof("report " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("matmul"));
  EXPECT_THAT(r.out, HasSubstr("812.50"));
}

TEST_F(CliTest, AReportStringWithANulIsWrittenWholeInTableAndCsv) {
  const std::string file = dir_.path() + "/nul.json";
  std::ofstream(file) << R"json({"calls": [{"Name": {"string": "before\u0000after"},
      "Duration (us)": {"microseconds": 5.0}, "Count": {"count": 1},
      "Device": {"string": "cpu0"}}], "device_metrics": {}, "configuration": {}})json";
  for (const char* format : {"table", "csv"}) {
    const Result r = Kprof("report " + file + " --format " + format);
    ASSERT_EQ(r.exit_code, 0) << format << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr(std::string("before\0after", 12))) << format;
  }
  // And what follows the string: the rest of the table, the CSV row's closing quote.
  EXPECT_THAT(Kprof("report " + file).out, HasSubstr("Configuration"));
  EXPECT_THAT(Kprof("report " + file + " --format csv").out,
              HasSubstr(std::string("\n\"before\0after\",5,", 17)));
  const Result json = Kprof("report " + file + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr("before\\u0000after"));
}

TEST_F(CliTest, AReportOfATimeResultIsRefusedSayingWhatTheFileIs) {
  const Result time = Kprof("time builtin spin_us --arg float64:5 --repeat 2 --format json");
  ASSERT_EQ(time.exit_code, 0) << time.err;
  const std::string file = dir_.path() + "/time.json";
  std::ofstream(file) << time.out;
  const Result r = Kprof("report " + file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("not a report"));
  EXPECT_THAT(r.err, HasSubstr("a time result (kprof time --format json)"));
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, AReportThatIsADirectoryIsSaidToBeOne) {
  const Result r = Kprof("report " + dir_.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("'" + dir_.path() + "': it is a directory, not a file"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("malformed")));
}

TEST_F(CliTest, AReportWithNaNAndInfinitiesAsTvmWritesThemRenders) {
  const std::string file = dir_.path() + "/tvm.json";
  std::ofstream(file) << R"json({"calls": [{"Name": {"string": "k"},
      "Duration (us)": {"microseconds": nan}, "Percent": {"percent": inf},
      "Count": {"count": 1}, "Device": {"string": "cpu0"}}],
      "device_metrics": {"cpu0": {"Duration (us)": {"microseconds": Infinity}}},
      "configuration": {}})json";
  const Result r = Kprof("report " + file + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(R"("microseconds":null)"));
}

TEST_F(CliTest, ErrorsAreOneLineWithTheCodesName) {
  const Result r = Kprof("time builtin gemm");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "kprof: NOT_FOUND: module holds no function 'gemm' (it exports: copy, fill, matmul, "
            "nop, saxpy, sleep_us, spin_us)\n");
  const Result usage = Kprof("frobnicate");
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("kprof: INVALID_ARGUMENT: unknown command 'frobnicate'"));
  const Result option = Kprof("info --bogus");
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_THAT(option.err, HasSubstr("unknown option '--bogus'"));
}

// Each command takes its own options alone: another command's is a usage error naming both.
TEST_F(CliTest, AnOptionOfAnotherCommandIsRefusedNamingIt) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"info --repeat 5",
            "--repeat is not an option of 'kprof info' (it is one of: time, "
            "profile; kprof info --help lists its own)"},
           {"modules --arg float32[4]", "--arg is not an option of 'kprof modules'"},
           {"report x.json --rank",
            "--rank is not an option of 'kprof report' (it is one of: "
            "batch;"},
           {"time builtin spin_us --collector rusage",
            "--collector is not an option of 'kprof time' (it is one of: profile;"},
           {"--no-sort report x.json",
            "--no-sort is an option of profile, report: give it after the command"},
           {"--checksums info", "--checksums is not an option of 'kprof info'"}}) {
    const Result r = Kprof(args);
    EXPECT_EQ(r.exit_code, 2) << "kprof " << args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(says)) << "kprof " << args;
  }
  // Global options go before or after the command alike.
  EXPECT_EQ(Kprof("info --format json").exit_code, 0);
  EXPECT_EQ(Kprof("--format json info").exit_code, 0);
  // Each command's help lists its own options, not another's.
  const Result help = Kprof("time --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--min-repeat-ms"));
  EXPECT_THAT(help.out, ::testing::Not(HasSubstr("--collector")));
}

// Every usage error exits 2, one line naming what was wrong; failed work exits 1.
TEST_F(CliTest, UsageErrorsExitTwo) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"", "no command"},
           {"time", "MODULE is required (usage: kprof time [OPTIONS] MODULE FUNCTION)"},
           {"time builtin", "FUNCTION is required (usage: kprof time [OPTIONS] MODULE FUNCTION)"},
           {"profile builtin", "usage: kprof profile MODULE FUNCTION"},
           {"profile --sequence x.json builtin spin_us", "takes no MODULE FUNCTION"},
           {"profile builtin spin_us --repeat 3", "--repeat is for --sequence"},
           {"report", "FILE is required (usage: kprof report [OPTIONS] FILE)"},
           {"batch", "JOBS is required (usage: kprof batch [OPTIONS] JOBS)"},
           {"load", "FILE is required (usage: kprof load [OPTIONS] FILE)"},
           {"unload", "MODULE is required (usage: kprof unload [OPTIONS] MODULE...)"},
           {"unload 0123", "'0123' is neither a module id (64 hex digits"},
           {"time builtin nop --arg float32[256, 256]",
            "the shell cut the unquoted spec at a space; quote it (--arg 'float32[256, 256]')"},
           {"time builtin nop float32[4]", "an argument spec goes after --arg"},
           {"time builtin nop --cache-flush-bytes 1Mx", "'1Mx' is not a size in bytes"},
           {"time builtin nop --tensor-offset 0,1x",
            "--tensor-offset: '1x' is not a size in bytes"},
           {"time builtin spin_us --repeat x", "Could not convert: --repeat = x"},
           {"time builtin spin_us extra", "unexpected argument 'extra' for 'kprof time'"},
           {"--format gbench info",
            "--format gbench is for time and batch, not info (info takes table, json and csv)"},
           {"batch jobs.jsonl --rank-initial 5", "--rank-initial requires --rank"},
           {"--format xml info", "--format 'xml' is not one of table, json, csv"},
           {"--timeout", "--timeout"},
           {"time builtin spin_us --grid 4", "needs both --grid and --block"},
           {"time builtin spin_us --grid x --block 1", "dimensions are integers"},
           {"--tls-cert c.pem info", "--tls-cert and --tls-key go together"},
           {"time builtin nop --repeats 3",
            "unknown option '--repeats' (did you mean --repeat? kprof time --help"},
           {"time builtin nop --format json --format csv",
            "--format is given 2 times: give it once (usage: kprof time"},
           {"top --interval 0.01", "--interval '0.01' is not a duration of 50ms or more"}}) {
    const Result r = Kprof(args);
    EXPECT_EQ(r.exit_code, 2) << "kprof " << args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(says)) << "kprof " << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "kprof " << args << ": " << r.err;
  }
  // A request the daemon refused: a module it does not hold.
  EXPECT_EQ(Kprof("unload " + std::string(64, '0')).exit_code, 1);
}

// `unload` takes the file a module was loaded from; sizes are numbers in JSON and have units in
// tables; info lists the perf events this host counts, and why the others are not.
TEST_F(CliTest, UnloadByFileSizesAndCountableEvents) {
  const std::string file = TestModulePath("vector_add");
  const Result load = Kprof("load " + file);
  ASSERT_EQ(load.exit_code, 0) << load.err;
  const std::string id = load.out.substr(0, 64);
  const Result json = Kprof("modules --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  bool listed = false;
  const auto modules = nlohmann::json::parse(json.out);
  for (const auto& m : modules["modules"]) {
    if (m["id"] != id) continue;
    listed = true;
    ASSERT_TRUE(m["size_bytes"].is_number_unsigned()) << m.dump();
    std::ifstream in(file, std::ios::binary | std::ios::ate);
    EXPECT_EQ(m["size_bytes"].get<uint64_t>(), static_cast<uint64_t>(in.tellg()));
  }
  EXPECT_TRUE(listed) << json.out;
  const Result info_json = Kprof("info --format json");
  const auto info = nlohmann::json::parse(info_json.out);
  EXPECT_EQ(info["limits"]["max_module_bytes"], 256u << 20) << info["limits"].dump();
  const Result table = Kprof("info");
  EXPECT_THAT(table.out, HasSubstr("limits: module 256 MiB, cache 4 GiB, arguments 4 GiB"));
  EXPECT_THAT(Kprof("modules").out,
              MatchesRegex("(.|\n)*" + id + " +vector_add.so +[0-9.]+ KiB .*"));
  bool uncountable = false;
  for (const auto& c : info["devices"][0]["collectors"]) {
    if (c["name"] != "perf") continue;
    for (const auto& u : c.value("uncountable", nlohmann::json::array())) {
      uncountable = true;
      EXPECT_THAT(table.out, HasSubstr(u["name"].get<std::string>()));
      EXPECT_THAT(table.out, HasSubstr(u["reason"].get<std::string>()));
    }
  }
  if (uncountable) {
    EXPECT_THAT(table.out, HasSubstr("    not countable here: "));
  }

  const Result unload = Kprof("unload " + file);
  ASSERT_EQ(unload.exit_code, 0) << unload.err;
  EXPECT_EQ(unload.out, "unloaded " + id + " (" + file + ")\n");
  EXPECT_THAT(Kprof("modules").out, ::testing::Not(HasSubstr(id)));
  const Result again = Kprof("unload " + file);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr(file + " (module " + id + "): "));
}

// A target that names several daemons: info lists each, time and profile pick the first that
// answers and has the device (and say which), the commands for one daemon refuse it.
TEST_F(CliTest, ATargetOfSeveralDaemons) {
  TempDir other_dir;
  Daemon other;
  ASSERT_TRUE(other.Start(other_dir.path() + "/cache"));
  const std::string a = daemon_.target(), b = other.target(), closed = "127.0.0.1:1";
  const auto run = [&](const std::string& target, const std::string& args) {
    return ::kprof::testing::RunKprof(target, args, dir_.path());
  };
  const Result table = run(a + "," + b, "info");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("== " + a + "\n"));
  EXPECT_THAT(table.out, HasSubstr("== " + b + "\n"));
  const Result json = run(a + "," + b, "info --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto daemons = nlohmann::json::parse(json.out)["daemons"];
  ASSERT_EQ(daemons.size(), 2u);
  EXPECT_EQ(daemons[0]["target"], a);
  EXPECT_EQ(daemons[1]["target"], b);
  EXPECT_EQ(daemons[1]["devices"][0]["device"], "cpu:0");
  const Result csv = run(a + "," + b, "info --format csv");
  EXPECT_THAT(csv.out, HasSubstr("target,device,type"));
  EXPECT_THAT(csv.out, HasSubstr(b + ",cpu:0,cpu,"));
  // One daemon named wrongly says so: a bare host dialled port 0, a URL asked DNS for "http://".
  for (const auto& [bad, says] :
       {std::pair<std::string, std::string>{"127.0.0.1", "'127.0.0.1' is not HOST:PORT"},
        {"http://" + a, "is a URL; a target is HOST:PORT"}}) {
    const Result refused = run(bad, "time builtin nop --repeat 1");
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_THAT(refused.err, HasSubstr(says)) << bad;
  }
  // One that does not answer: the others are listed, and the command fails saying which.
  const Result partly = run(a + "," + closed, "--timeout 5s info");
  EXPECT_EQ(partly.exit_code, 1);
  EXPECT_THAT(partly.out, HasSubstr("== " + a + "\n"));
  EXPECT_THAT(partly.err, HasSubstr("1 of 2 daemons did not answer: " + closed + ": UNAVAILABLE"));

  const Result first = run(a + "," + b, "time builtin nop --format json");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.err, HasSubstr("kprof: on " + a + " ("));
  EXPECT_THAT(first.err, HasSubstr("the first of the target's 2 daemons with cpu:0"));
  EXPECT_EQ(nlohmann::json::parse(first.out)["device"], "cpu:0");
  const Result past_closed = run(closed + "," + b, "--timeout 5s profile builtin nop");
  ASSERT_EQ(past_closed.exit_code, 0) << past_closed.err;
  EXPECT_THAT(past_closed.err, HasSubstr("kprof: on " + b + " ("));
  // A device as the daemons name it or shorter: "cpu" is "cpu:0".
  const Result short_name = run(a + "," + b, "time builtin nop --device cpu");
  ASSERT_EQ(short_name.exit_code, 0) << short_name.err;
  EXPECT_THAT(short_name.err, HasSubstr("daemons with cpu:0"));
  // A name that is no device's: the daemon's own refusal, as with one daemon.
  const Result unknown = run(a + "," + b, "time builtin nop --device gpu:0");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("device 'gpu:0' is of an unknown type")) << unknown.err;
  const Result none = run(a + "," + closed, "--timeout 5s time builtin nop --device cuda:0");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("none of the target's 2 daemons can measure on cuda:0: " + a +
                                  " has cpu:0; " + closed + ": "));

  // A batch over both: each line says which daemon measured it, one of the two.
  {
    std::ofstream jobs(dir_.path() + "/spread.jsonl");
    for (int k = 0; k < 8; ++k) {
      jobs << R"({"id": "j)" << k
           << R"(", "module": "builtin", "function": "spin_us", "args": ["float64:2000"], )"
           << R"("repeat": 1})"
           << "\n";
    }
  }
  const Result spread = run(a + "," + b, "batch " + dir_.path() + "/spread.jsonl");
  ASSERT_EQ(spread.exit_code, 0) << spread.err;
  std::set<std::string> measured_on;
  for (absl::string_view line : absl::StrSplit(spread.out, '\n', absl::SkipEmpty())) {
    const auto parsed = nlohmann::json::parse(line);
    ASSERT_TRUE(parsed.contains("daemon")) << line;
    measured_on.insert(parsed["daemon"].get<std::string>());
  }
  EXPECT_THAT(measured_on, ::testing::IsSubsetOf(std::set<std::string>{a, b}));
  EXPECT_FALSE(measured_on.empty());
  // One daemon's lines need not say.
  const Result alone = run(a, "batch " + dir_.path() + "/spread.jsonl");
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_THAT(alone.out, Not(HasSubstr("\"daemon\"")));

  const Result load = run(a + "," + b, "load " + TestModulePath("vector_add"));
  EXPECT_EQ(load.exit_code, 2);
  EXPECT_THAT(load.err, HasSubstr("the target names 2 daemons (" + a + ", " + b +
                                  "); this command works with one"));
}

TEST_F(CliTest, InfoInEveryFormat) {
  const Result table = Kprof("info");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("cpu:0"));
  const Result json = Kprof("info --format json");
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(json.out)["devices"][0]["device"], "cpu:0");
  const Result csv = Kprof("info --format csv");
  EXPECT_THAT(csv.out, HasSubstr("device,type"));
}

}  // namespace
}  // namespace kprof

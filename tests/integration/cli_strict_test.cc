// kprof's strict checks against a real kprofd: --checks strict beside --reference on `time`, the
// checked repeats in the table and the JSON, a cheating kernel's refusal naming its check, and
// batch lines that ask for strict checks of the batch's reference.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "cheat_kit.h"
#include "cli.h"
#include "cli_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "nlohmann/json.hpp"

namespace kprof {
namespace {

using ::kprof::testing::CheatKit;
using ::kprof::testing::Refuses;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

using Result = ::kprof::testing::CliResult;

class CliStrictTest : public CliTest {
 protected:
  // `kprof batch`'s JSONL output: each line by its id.
  static std::map<std::string, nlohmann::json> LinesById(const std::string& out) {
    std::map<std::string, nlohmann::json> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      const auto result = nlohmann::json::parse(line);
      lines[result["id"]] = result;
    }
    return lines;
  }

  // c = a + b by `function` of cheats.so (answers.so's for add_honest), 20 repeats.
  static std::string Add(const std::string& function, const std::string& checks) {
    const std::string module = TestModulePath(function == "add_honest" ? "answers" : "cheats");
    return absl::StrCat("time ", module, " ", function,
                        " --arg float32[1000] --arg float32[1000]:random "
                        "--arg float32[1000]:random --repeat 20 --reference ",
                        TestModulePath("answers"), ":add_ref", checks);
  }
};

TEST_F(CliStrictTest, StrictChecksNameTheirRepeatsAndRefuseWhatBasicOnesPass) {
  const Result table = Kprof(Add("add_honest", " --checks strict"));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("strict: repeats "));
  EXPECT_THAT(table.out, HasSubstr(",20 checked, 1 on fresh inputs"));
  const Result json = Kprof(Add("add_honest", " --checks strict --format json"));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["check"]["checks"], "strict");
  EXPECT_EQ(parsed["check"]["checked_repeats"].size(), 4u);
  EXPECT_EQ(parsed["check"]["fresh_inputs"], 1);

  const Result basic = Kprof(Add("add_remembers", " --checks basic"));
  EXPECT_EQ(basic.exit_code, 0) << basic.err;
  const Result strict = Kprof(Add("add_remembers", " --checks strict"));
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_EQ(strict.out, "");
  EXPECT_THAT(strict.err,
              HasSubstr("ABORTED: wrong answer: function 'add_remembers', checked repeat "));
}

TEST_F(CliStrictTest, ALevelThatIsNotOneOrChecksWithoutAReferenceAreUsageErrors) {
  const Result unknown = Kprof(Add("add_honest", " --checks paranoid"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("checks 'paranoid' is not a level of checking (accepted: "
                                     "basic, strict)"));
  const Result alone = Kprof("time builtin nop --checks strict");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_THAT(alone.err, HasSubstr("--checks and --bitwise shape a check: give --reference"));
  const Result numbered = Kprof(Add("add_honest", " --checks strict --number 5"));
  EXPECT_EQ(numbered.exit_code, 1);
  EXPECT_THAT(numbered.err, HasSubstr("strict checks time every call as a repeat of its own"));
}

TEST_F(CliStrictTest, BatchLinesAskForStrictChecksOfTheBatchsReference) {
  std::ofstream jobs(dir_.path() + "/jobs.jsonl");
  const nlohmann::json args = {"float32[500]", "float32[500]:random", "float32[500]:random"};
  for (const auto& [id, function, checks] :
       {std::tuple{"honest", "add_honest", "strict"},
        std::tuple{"remembers", "add_remembers", "strict"},
        std::tuple{"remembers-basic", "add_remembers", "basic"}}) {
    const std::string module =
        TestModulePath(std::string(function) == "add_honest" ? "answers" : "cheats");
    // Another size for the basic line: the worker keeps the module, and add_remembers its
    // answer of the strict line's size.
    const bool basic = std::string(checks) == "basic";
    const nlohmann::json sized =
        basic ? nlohmann::json{"float32[600]", "float32[600]:random", "float32[600]:random"} : args;
    jobs << nlohmann::json{{"id", id},      {"module", module}, {"function", function},
                           {"args", sized}, {"repeat", 8},      {"checks", checks}}
                .dump()
         << "\n";
  }
  jobs.close();
  const Result batch = Kprof("batch " + dir_.path() + "/jobs.jsonl --reference " +
                             TestModulePath("answers") + ":add_ref");
  EXPECT_EQ(batch.exit_code, 3) << batch.err;  // one job failed
  std::map<std::string, nlohmann::json> lines = LinesById(batch.out);
  EXPECT_EQ(lines["honest"]["status"], "OK");
  EXPECT_EQ(lines["remembers-basic"]["status"], "OK");
  EXPECT_EQ(lines["remembers"]["status"], "ABORTED");
  EXPECT_THAT(lines["remembers"]["error"].get<std::string>(),
              HasSubstr("wrong answer: function 'add_remembers', checked repeat "));
}

// Every cheat of the kit, as lines of one batch checked strictly from the command line, beside
// honest ones: each cheat's line names its check, the honest lines are timed.
TEST_F(CliStrictTest, EveryCheatInAStrictBatchIsRefusedNamingItsCheck) {
  std::ofstream jobs(dir_.path() + "/kit.jsonl");
  const auto line = [&](const std::string& id, const std::string& module,
                        const std::string& function) {
    const bool heavy = function.rfind("heavy_", 0) == 0;
    const nlohmann::json args = {"float32[512]", "float32[512]:random", "float32[512]:random"};
    nlohmann::json job = {{"id", id},
                          {"module", TestModulePath(module)},
                          {"function", function},
                          {"args", args},
                          {"repeat", 12}};
    if (heavy) job["reference"] = TestModulePath("cheats") + ":heavy_ref";
    jobs << job.dump() << "\n";
  };
  line("honest-add", "answers", "add_honest");
  for (const auto& cheat : CheatKit()) line(cheat.function, "cheats", cheat.function);
  line("honest-heavy", "cheats", "heavy_honest");
  jobs.close();
  const Result batch = Kprof("batch " + dir_.path() + "/kit.jsonl --checks strict --reference " +
                             TestModulePath("answers") + ":add_ref");
  EXPECT_EQ(batch.exit_code, 3) << batch.err;
  std::map<std::string, nlohmann::json> lines = LinesById(batch.out);
  ASSERT_EQ(lines.size(), CheatKit().size() + 2) << batch.out;
  EXPECT_EQ(lines["honest-add"]["status"], "OK") << lines["honest-add"];
  EXPECT_EQ(lines["honest-heavy"]["status"], "OK") << lines["honest-heavy"];
  for (const auto& cheat : CheatKit()) {
    SCOPED_TRACE(cheat.function);
    const nlohmann::json& result = lines[cheat.function];
    EXPECT_EQ(result["status"], "ABORTED") << result;
    EXPECT_THAT(result.value("error", ""), Refuses(cheat));
  }
}

// --checks strict with no --reference: the level of every line's own reference; a line with
// none is refused, naming what to give.
TEST_F(CliStrictTest, ABatchsLevelAloneHoldsForTheLinesOwnReferences) {
  std::ofstream jobs(dir_.path() + "/own.jsonl");
  const nlohmann::json args = {"float32[256]", "float32[256]:random", "float32[256]:random"};
  jobs << nlohmann::json{{"id", "own"},
                         {"module", TestModulePath("answers")},
                         {"function", "add_honest"},
                         {"args", args},
                         {"repeat", 8},
                         {"reference", TestModulePath("answers") + ":add_ref"}}
              .dump()
       << "\n"
       << nlohmann::json{{"id", "bare"},
                         {"module", TestModulePath("answers")},
                         {"function", "add_honest"},
                         {"args", args}}
              .dump()
       << "\n";
  jobs.close();
  const Result batch = Kprof("batch " + dir_.path() + "/own.jsonl --checks strict");
  EXPECT_EQ(batch.exit_code, 3) << batch.err;
  std::map<std::string, nlohmann::json> lines = LinesById(batch.out);
  EXPECT_EQ(lines["own"]["status"], "OK") << lines["own"];
  EXPECT_EQ(lines["own"]["check"]["checks"], "strict") << lines["own"];
  EXPECT_EQ(lines["bare"]["status"], "INVALID_ARGUMENT") << lines["bare"];
  EXPECT_THAT(lines["bare"].value("error", ""),
              HasSubstr("the batch's --checks and --bitwise are for lines with a 'reference' of "
                        "their own"));
}

}  // namespace
}  // namespace kprof

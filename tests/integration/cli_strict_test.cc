// kprof's strict checks against a real kprofd: --checks strict beside --reference on `time`, the
// checked repeats in the table and the JSON, a cheating kernel's refusal naming its check, and
// batch lines that ask for strict checks of the batch's reference.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "cli.h"
#include "cli_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "nlohmann/json.hpp"

namespace kprof {
namespace {

using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

using Result = ::kprof::testing::CliResult;

class CliStrictTest : public CliTest {
 protected:
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
  EXPECT_THAT(table.out, HasSubstr(",20 checked, 2 on fresh inputs"));
  const Result json = Kprof(Add("add_honest", " --checks strict --format json"));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["check"]["checks"], "strict");
  EXPECT_EQ(parsed["check"]["checked_repeats"].size(), 4u);
  EXPECT_EQ(parsed["check"]["fresh_inputs"], 2);

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
  std::map<std::string, nlohmann::json> lines;
  std::istringstream out(batch.out);
  for (std::string line; std::getline(out, line);) {
    const auto result = nlohmann::json::parse(line);
    lines[result["id"]] = result;
  }
  EXPECT_EQ(lines["honest"]["status"], "OK");
  EXPECT_EQ(lines["remembers-basic"]["status"], "OK");
  EXPECT_EQ(lines["remembers"]["status"], "ABORTED");
  EXPECT_THAT(lines["remembers"]["error"].get<std::string>(),
              HasSubstr("wrong answer: function 'add_remembers', checked repeat "));
}

}  // namespace
}  // namespace kprof

// Strict checks in the runner (core/measure/strict_checks.h), with the cheating kernels of
// tests/modules/cheats.c: the draws (how many checks, the last always, which get fresh inputs,
// spread over the repeats), the poison and the fresh data they write, and the failures the
// runner finds itself (a thread left running, a finding in the times).
#include "core/measure/strict_checks.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/args/arg_spec.h"
#include "core/measure/local_runner.h"
#include "core/modules/shared_library.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

// The process's threads, as a worker lists them.
std::vector<int> Threads() {
  std::vector<int> ids;
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(tasks)) {
      if (entry->d_name[0] != '.') ids.push_back(std::atoi(entry->d_name));
    }
    closedir(tasks);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// What a strict run sent out: each checked call, and its first argument's floats.
struct Sent {
  CheckedRepeat checked;
  std::vector<float> out;
};

class StrictChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Loaded once and never closed: what its kernels keep between calls stays reachable.
    static Module* const cheats = [] {
      auto opened = SharedLibraryModule::OpenFile(TestModulePath("cheats"));
      return opened.ok() ? opened->release() : nullptr;
    }();
    ASSERT_NE(cheats, nullptr);
    module_ = cheats;
  }

  // c = a + b (or f) over float32[n] by `function`, strictly, `repeats` repeats.
  absl::StatusOr<TimeResult> Run(const std::string& function, int64_t repeats,
                                 std::vector<Sent>* sent, std::string* finding = nullptr,
                                 int n = 256) {
    Job job;
    job.module = module_;
    job.function = function;
    job.device = kCpu;
    const std::string vec = "float32[" + std::to_string(n) + "]";
    job.arg_specs = {vec, vec + ":random", vec + ":random"};
    TimeJob time;
    time.options.repeat = repeats;
    time.strict.emplace();
    time.strict->threads = Threads;
    time.strict->send = [sent](const Arguments& args, const CheckedRepeat& checked) {
      Sent s{checked, std::vector<float>(static_cast<size_t>(args.specs()[0].num_elements))};
      EXPECT_THAT(args.ReadBack(0, s.out.data()), IsOk());
      sent->push_back(std::move(s));
      return absl::OkStatus();
    };
    time.strict->finding = [finding](const std::string& f) {
      if (finding != nullptr) *finding = f;
    };
    return LocalRunner().Time(job, time);
  }

  const Module* module_ = nullptr;
};

TEST_F(StrictChecksTest, FourChecksTheLastAlwaysTheFirstOnFreshInputsTheOthersKeepingThem) {
  std::set<int64_t> checked_ever;
  for (int run = 0; run < 60; ++run) {
    std::vector<Sent> sent;
    auto result = Run("heavy_honest", 10, &sent, nullptr, 16);
    ASSERT_THAT(result, IsOk());
    ASSERT_EQ(sent.size(), 4u);
    EXPECT_EQ(sent.back().checked.repeat, 9);
    EXPECT_TRUE(sent.front().checked.fresh);
    int fresh = 0;
    std::set<uint64_t> seeds;
    for (size_t i = 0; i < sent.size(); ++i) {
      const CheckedRepeat& c = sent[i].checked;
      EXPECT_EQ(c.repeats, 10);
      if (i > 0) {
        EXPECT_GT(c.repeat, sent[i - 1].checked.repeat);
      }
      fresh += c.fresh;
      if (c.fresh) seeds.insert(c.seed);
      // A check that keeps the inputs has the data of the fresh one before it.
      if (!c.fresh) {
        EXPECT_EQ(c.seed, sent[i - 1].checked.seed);
      }
      EXPECT_EQ(c.written, (std::vector<bool>{true, false, false}));
      EXPECT_EQ(c.unchanged, (std::vector<bool>{false, true, true}));
      checked_ever.insert(c.repeat);
    }
    EXPECT_EQ(fresh, 1);
    EXPECT_EQ(seeds.size(), 1u);  // one reference run judges all four
  }
  // Drawn, not fixed: over 60 runs every repeat was checked at some point.
  EXPECT_EQ(checked_ever.size(), 10u);
}

TEST_F(StrictChecksTest, AWriterThatSkipsLeavesThePoison) {
  std::vector<Sent> sent;
  ASSERT_THAT(Run("add_skips_familiar", 12, &sent), IsOk());  // the runner does not judge
  bool poisoned = false;
  for (const Sent& s : sent) {
    if (!s.checked.fresh)
      poisoned |= std::all_of(s.out.begin(), s.out.end(), [](float v) { return std::isnan(v); });
  }
  EXPECT_TRUE(poisoned) << "a check that keeps the inputs finds the output poisoned";
}

TEST_F(StrictChecksTest, AThreadLeftRunningOrATimeThatDependsOnTheInputsFailsIt) {
  std::vector<Sent> sent;
  EXPECT_THAT(
      Run("add_in_thread", 10, &sent).status(),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("thread(s) still running when it returned")));
  std::string finding;
  sent.clear();
  ASSERT_THAT(Run("heavy_remembers", 20, &sent, &finding, 2048), IsOk());
  EXPECT_THAT(finding, HasSubstr("the function's time depends on seeing the same inputs again"));
  finding.clear();
  ASSERT_THAT(Run("heavy_honest", 20, &sent, &finding, 2048), IsOk());
  EXPECT_EQ(finding, "");
}

TEST(StrictArguments, RefillWritesAnotherSeedsDataInPlaceAndPoisonIsNanOrAPattern) {
  std::vector<ArgSpec> specs;
  for (const char* text : {"float32[100]:random", "int16[50]:random", "float64:3.5"}) {
    specs.push_back(*ParseArgSpec(text));
  }
  auto args = Arguments::Allocate(specs, 1, kCpu);
  auto other = Arguments::Allocate(specs, 2, kCpu);
  ASSERT_THAT(args, IsOk());
  ASSERT_THAT(other, IsOk());
  void* const where = (*args)->tensors()[0].data;
  ASSERT_THAT((*args)->Refill(2), IsOk());
  EXPECT_EQ((*args)->tensors()[0].data, where);
  for (size_t k = 0; k < specs.size(); ++k) {
    EXPECT_EQ(std::memcmp((*args)->HostData(k), (*other)->HostData(k), specs[k].num_bytes), 0)
        << "argument " << k;
  }
  ASSERT_THAT((*args)->Poison(0), IsOk());
  ASSERT_THAT((*args)->Poison(1), IsOk());
  const auto* floats = static_cast<const float*>((*args)->HostData(0));
  EXPECT_TRUE(std::all_of(floats, floats + 100, [](float v) { return std::isnan(v); }));
  const auto* bytes = static_cast<const unsigned char*>((*args)->HostData(1));
  EXPECT_TRUE(std::all_of(bytes, bytes + 100, [](unsigned char b) { return b == kPoisonByte; }));
  EXPECT_NE(*(*args)->Fingerprint(0), *(*other)->Fingerprint(0));
  EXPECT_EQ(*(*args)->Fingerprint(2), *(*other)->Fingerprint(2));
}

}  // namespace
}  // namespace kprof::core

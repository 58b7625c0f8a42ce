// kprofd end to end: where a job's arguments lie (tensor placement, randomized layouts) and
// whether its calls are measured hot or cold.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kprof_client.h"
#include "emulation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "service_fixture.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::ServiceTest;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;
using ::testing::SizeIs;

class PlacementTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    auto module = client_->LoadModuleFile(TestModulePath("placement"));
    ASSERT_THAT(module, IsOk());
    module_ = module->id();
  }

  // at_offsets: succeeds when the two float tensors lie `first` and `second` bytes past a
  // multiple of `boundary`, fails with 12 or 13 naming the first that does not.
  v1::TimeEvaluateRequest AtOffsets(uint64_t first, uint64_t second, uint64_t boundary = 4096) {
    return Time(module_, "at_offsets",
                {absl::StrCat("int64:", first | second << 12), absl::StrCat("int64:", boundary),
                 "float32[3000]:random", "float32[5]"});
  }

  std::string module_;
};

TEST_F(PlacementTest, AModuleFunctionSeesTheRequestedPlacement) {
  // The default: argument k at k × 256 past a page boundary.
  auto r = client_->TimeEvaluate(AtOffsets(512, 768));
  ASSERT_THAT(r, IsOk());
  ASSERT_THAT(r->placement(), SizeIs(4));
  EXPECT_EQ(r->placement(2).offset(), 512u);
  EXPECT_EQ(r->placement(2).alignment(), 512u);
  EXPECT_EQ(r->placement(3).offset(), 768u);
  EXPECT_EQ(r->placement(3).alignment(), 256u);
  EXPECT_EQ(r->mode(), "hot");
  EXPECT_FALSE(r->huge_pages());
  // Whether repeats were throttled, or why that cannot be told here (no cpufreq on most VMs).
  if (r->throttle_check().empty()) {
    EXPECT_LE(r->throttled_repeats_size(), r->seconds_per_call_size());
  } else {
    EXPECT_THAT(r->throttle_check(), HasSubstr("cpufreq"));
    EXPECT_EQ(r->throttled_repeats_size(), 0);
  }

  // One offset for all.
  v1::TimeEvaluateRequest request = AtOffsets(192, 192);
  request.add_tensor_offset(192);
  r = client_->TimeEvaluate(request);
  ASSERT_THAT(r, IsOk());
  for (const v1::TensorPlacement& p : r->placement()) {
    EXPECT_EQ(p.offset(), 192u);
    EXPECT_EQ(p.alignment(), 64u);
  }
  // The function sees where they are, not where a wrong expectation puts them.
  request = AtOffsets(128, 192);
  request.add_tensor_offset(192);
  EXPECT_THAT(client_->TimeEvaluate(request),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("returned 12")));

  // One per argument.
  request = AtOffsets(64, 3968);
  for (uint32_t offset : {0u, 0u, 64u, 3968u}) request.add_tensor_offset(offset);
  ASSERT_THAT(client_->TimeEvaluate(request), IsOk());

  // Aligned to 2 MiB, with huge pages asked for.
  request = AtOffsets(0, 0, 2 << 20);
  request.set_tensor_alignment(2 << 20);
  request.set_huge_pages(true);
  r = client_->TimeEvaluate(request);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->huge_pages());
  EXPECT_EQ(r->placement(2).alignment(), 2u << 20);
}

// Profiles place their arguments as asked too, and each row says where they lay.
TEST_F(PlacementTest, AProfileAndASequencePlaceTheirArgumentsAndSaySo) {
  v1::ProfileFunctionRequest profile;
  *profile.mutable_call() = AtOffsets(512, 1536).call();
  for (uint32_t offset : {0u, 64u, 512u, 1536u}) profile.add_tensor_offset(offset);
  auto r = client_->ProfileFunction(profile);
  ASSERT_THAT(r, IsOk());  // at_offsets fails where the tensors are not where it was told
  ASSERT_EQ(r->report().calls_size(), 1);
  EXPECT_EQ(r->report().calls(0).metrics().at("Argument Placement").string(),
            "+0 (aligned 4096), +64 (aligned 64), +512 (aligned 512), +1536 (aligned 512)");
  // Elsewhere than asked: the function says so.
  profile.set_tensor_offset(3, 1024);
  EXPECT_THAT(client_->ProfileFunction(profile),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("returned 13")));
  profile.set_tensor_alignment(48);
  EXPECT_THAT(client_->ProfileFunction(profile),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor_alignment = 48")));

  // A sequence: one offset for every argument of every call.
  v1::ProfileRequest sequence;
  *sequence.add_calls() = AtOffsets(256, 256).call();
  *sequence.add_calls() = AtOffsets(256, 256).call();
  sequence.add_tensor_offset(256);
  auto s = client_->Profile(sequence);
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(s->report().calls_size(), 2);
  for (const auto& row : s->report().calls()) {
    EXPECT_EQ(row.metrics().at("Argument Placement").string(),
              "+256 (aligned 256), +256 (aligned 256), +256 (aligned 256), +256 (aligned 256)");
  }
  // Offsets per argument must fit every call: the second has one argument fewer.
  sequence.clear_tensor_offset();
  for (uint32_t offset : {0u, 64u, 256u, 256u}) sequence.add_tensor_offset(offset);
  sequence.mutable_calls(1)->mutable_args()->RemoveLast();
  EXPECT_THAT(client_->Profile(sequence),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("call 1 (at_offsets)")));
}

TEST_F(PlacementTest, BadPlacementOptionsAreInvalidArgumentNamingThem) {
  struct Case {
    void (*set)(v1::TimeEvaluateRequest&);
    const char* message;
  };
  const Case cases[] = {
      {[](v1::TimeEvaluateRequest& r) { r.set_tensor_alignment(48); }, "tensor_alignment = 48"},
      {[](v1::TimeEvaluateRequest& r) { r.set_throttle_threshold(0); }, "throttle_threshold = 0"},
      {[](v1::TimeEvaluateRequest& r) { r.set_warmup_ms(-5); }, "warmup_ms = -5"},
      {[](v1::TimeEvaluateRequest& r) { r.add_tensor_offset(4100); }, "tensor_offset = 4100"},
      {[](v1::TimeEvaluateRequest& r) {
         r.add_tensor_offset(0);
         r.add_tensor_offset(64);
       },
       "tensor_offset has 2 values for 4 arguments"},
      {[](v1::TimeEvaluateRequest& r) { r.set_repeats_per_layout(3); },
       "repeats_per_layout applies only with randomize_layout"},
      {[](v1::TimeEvaluateRequest& r) {
         r.set_randomize_layout(true);
         r.set_repeats_per_layout(-1);
       },
       "repeats_per_layout = -1"},
      {[](v1::TimeEvaluateRequest& r) {
         r.set_randomize_layout(true);
         r.add_tensor_offset(0);
       },
       "not both"},
  };
  for (const Case& c : cases) {
    v1::TimeEvaluateRequest request = AtOffsets(0, 0);
    c.set(request);
    EXPECT_THAT(client_->TimeEvaluate(request),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.message;
  }
}

TEST_F(PlacementTest, RandomLayoutsAreDistinctReproducibleAndKeepTheData) {
  const auto copy = [](uint64_t seed, bool randomize) {
    v1::TimeEvaluateRequest r =
        Time("builtin", "copy", {"float32[50000]", "float32[50000]:random"});
    r.set_seed(seed);
    r.set_repeat(8);
    r.set_checksums(true);
    r.set_randomize_layout(randomize);
    return r;
  };
  auto plain = client_->TimeEvaluate(copy(5, false));
  ASSERT_THAT(plain, IsOk());
  EXPECT_THAT(plain->layouts(), SizeIs(0));
  auto moved = client_->TimeEvaluate(copy(5, true));
  ASSERT_THAT(moved, IsOk());
  ASSERT_THAT(moved->layouts(), SizeIs(8));
  std::set<std::vector<uint64_t>> distinct;
  for (int i = 0; i < moved->layouts_size(); ++i) {
    const v1::Layout& layout = moved->layouts(i);
    EXPECT_EQ(layout.first_repeat(), i);
    EXPECT_EQ(layout.repeats(), 1);
    EXPECT_DOUBLE_EQ(layout.median(), moved->seconds_per_call(i));
    ASSERT_THAT(layout.offsets(), SizeIs(2));
    for (uint64_t offset : layout.offsets()) {
      EXPECT_EQ(offset % 64, 0u);
      EXPECT_LT(offset, 4096u);
    }
    distinct.insert({layout.offsets().begin(), layout.offsets().end()});
  }
  EXPECT_GE(distinct.size(), 6u);  // 64 × 64 places for two tensors: repeats are rare
  // The placement reported is the first layout's.
  EXPECT_EQ(moved->placement(0).offset(), moved->layouts(0).offsets(0));
  // Moved between repeats, the data is the same: the copy's output and input alike.
  EXPECT_EQ(std::vector<std::string>(moved->checksums().begin(), moved->checksums().end()),
            std::vector<std::string>(plain->checksums().begin(), plain->checksums().end()));

  // The same seed, the same layouts; another seed, others.
  auto again = client_->TimeEvaluate(copy(5, true));
  auto other = client_->TimeEvaluate(copy(6, true));
  ASSERT_THAT(again, IsOk());
  ASSERT_THAT(other, IsOk());
  bool all_same = true, all_same_other = true;
  for (int i = 0; i < 8; ++i) {
    for (int k = 0; k < 2; ++k) {
      all_same &= again->layouts(i).offsets(k) == moved->layouts(i).offsets(k);
      all_same_other &= other->layouts(i).offsets(k) == moved->layouts(i).offsets(k);
    }
  }
  EXPECT_TRUE(all_same);
  EXPECT_FALSE(all_same_other);

  // Repeats per layout: 8 repeats, 4 layouts of 2, each median between its repeats.
  v1::TimeEvaluateRequest grouped = copy(5, true);
  grouped.set_repeats_per_layout(2);
  auto g = client_->TimeEvaluate(grouped);
  ASSERT_THAT(g, IsOk());
  ASSERT_THAT(g->layouts(), SizeIs(4));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(g->layouts(i).first_repeat(), 2 * i);
    EXPECT_EQ(g->layouts(i).repeats(), 2);
    EXPECT_DOUBLE_EQ(g->layouts(i).median(),
                     (g->seconds_per_call(2 * i) + g->seconds_per_call(2 * i + 1)) / 2);
  }
}

TEST_F(PlacementTest, ColdIsSlowerForACachedKernelAndItsFlushIsNotTimed) {
  KPROF_SKIP_UNDER_EMULATION("times cache effects");
  // A copy of 1 MiB onto 1 MiB fits the last-level cache of any host this runs on: hot, it
  // stays there; cold, both come from memory.
  const auto copy = [](bool cold) {
    v1::TimeEvaluateRequest r =
        Time("builtin", "copy", {"float32[262144]", "float32[262144]:random"});
    r.set_repeat(5);
    r.set_min_repeat_ms(5);
    r.set_cold(cold);
    return r;
  };
  // A neighbour's memory traffic (tests beside this one on a busy machine) can slow one hot
  // copy to the cold one's speed: the difference must show in one of three pairs.
  double hot_median = 0, cold_median = 0;
  for (int pair = 0; pair < 3 && !(cold_median > 1.2 * hot_median); ++pair) {
    auto hot = client_->TimeEvaluate(copy(false));
    auto cold = client_->TimeEvaluate(copy(true));
    ASSERT_THAT(hot, IsOk());
    ASSERT_THAT(cold, IsOk());
    EXPECT_EQ(hot->mode(), "hot");
    EXPECT_EQ(cold->mode(), "cold");
    hot_median = hot->statistics().median();
    cold_median = cold->statistics().median();
  }
  EXPECT_GT(cold_median, 1.2 * hot_median) << "hot " << hot_median << " s, cold " << cold_median;

  // The flush copies at least a megabyte before every call, some hundreds of microseconds; a
  // nop measured cold takes none of it.
  v1::TimeEvaluateRequest nop = Time("builtin", "nop", {});
  nop.set_repeat(3);
  nop.set_number(20);
  nop.set_cold(true);
  auto n = client_->TimeEvaluate(nop);
  ASSERT_THAT(n, IsOk());
  EXPECT_LT(n->statistics().median(), 20e-6);
  EXPECT_GT(n->timing().execution_seconds(), 60 * 100e-6);  // the flushes did happen
}

}  // namespace
}  // namespace kprof

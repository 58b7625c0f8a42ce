#include "server/worker/job_options.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::server {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};
constexpr base::Device kCuda{base::DeviceType::kCuda, 0};

kprof::v1::TimeEvaluateRequest Spin() {
  kprof::v1::TimeEvaluateRequest r;
  r.mutable_call()->set_module_id("builtin");
  r.mutable_call()->set_function("spin_us");
  r.mutable_call()->add_args("float64:1");
  return r;
}

TEST(TimeJobFromRequest, CarriesEveryOption) {
  kprof::v1::TimeEvaluateRequest r = Spin();
  r.set_number(7);
  r.set_repeat(5);
  r.set_min_repeat_ms(2.5);
  r.set_cooldown_interval_ms(1);
  r.set_repeats_to_cooldown(2);
  r.set_cache_flush_bytes(1024);
  r.set_preprocess("cache_flush_cpu_non_first_arg");
  r.set_checksums(true);
  r.set_outlier_filter("iqr");
  const auto time = TimeJobFromRequest(r, kCpu, 1 << 20);
  ASSERT_THAT(time, IsOk());
  EXPECT_EQ(time->options.number, 7);
  EXPECT_EQ(time->options.repeat, 5);
  EXPECT_EQ(time->options.min_repeat, absl::Microseconds(2500));
  EXPECT_EQ(time->options.cooldown_interval, absl::Milliseconds(1));
  EXPECT_EQ(time->options.repeats_to_cooldown, 2);
  EXPECT_EQ(time->options.cache_flush_bytes, 1024);
  EXPECT_EQ(time->preprocess, "cache_flush_cpu_non_first_arg");
  EXPECT_TRUE(time->checksums);
  EXPECT_EQ(time->options.outliers, core::OutlierFilter::kTukey);
}

TEST(TimeJobFromRequest, ConvergenceSetsItsOwnRepeatBound) {
  kprof::v1::TimeEvaluateRequest r = Spin();
  r.set_max_relative_stddev(0.01);
  r.set_max_time_ms(500);
  const auto time = TimeJobFromRequest(r, kCpu, 0);
  ASSERT_THAT(time, IsOk());
  EXPECT_EQ(time->options.repeat, core::kDefaultConvergenceRepeats);
  EXPECT_EQ(time->options.max_time, absl::Milliseconds(500));
}

TEST(TimeJobFromRequest, EachBadOptionIsNamedWithWhatIsAccepted) {
  struct Case {
    void (*set)(kprof::v1::TimeEvaluateRequest&);
    base::Device device;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {[](auto& r) { r.set_repeat(0); }, kCpu, absl::StatusCode::kInvalidArgument,
       "repeat = 0 is out of range"},
      {[](auto& r) { r.set_number(-3); }, kCpu, absl::StatusCode::kInvalidArgument,
       "number = -3 is out of range"},
      {[](auto& r) { r.set_min_repeat_ms(1e308); }, kCpu, absl::StatusCode::kInvalidArgument,
       "min_repeat_ms = 1e+308 is out of range (accepted: 0 to 3600000)"},
      {[](auto& r) { r.set_cooldown_interval_ms(-1); }, kCpu, absl::StatusCode::kInvalidArgument,
       "cooldown_interval_ms = -1"},
      {[](auto& r) { r.set_max_time_ms(10); }, kCpu, absl::StatusCode::kInvalidArgument,
       "apply only with max_relative_stddev"},
      {[](auto& r) { r.set_outlier_filter("tukey"); }, kCpu, absl::StatusCode::kInvalidArgument,
       "unknown outlier filter 'tukey' (accepted: none, iqr)"},
      {[](auto& r) { r.set_preprocess("x"); }, kCpu, absl::StatusCode::kInvalidArgument,
       "unknown pre-processing step 'x'"},
      {[](auto& r) { r.set_preprocess("cache_flush_cpu_non_first_arg"); }, kCuda,
       absl::StatusCode::kInvalidArgument, "is not a CPU"},
      {[](auto& r) { r.set_flush_l2(true); }, kCpu, absl::StatusCode::kInvalidArgument,
       "give cache_flush_bytes"},
      {[](auto& r) { r.set_cache_flush_bytes(600); }, kCpu, absl::StatusCode::kResourceExhausted,
       "needs two buffers of that size, over the limit of 1000 bytes"},
      {[](auto& r) { r.set_huge_pages(true); }, kCuda, absl::StatusCode::kInvalidArgument,
       "huge_pages asks for transparent huge pages of CPU memory; device cuda:0 is not a CPU"},
      {[](auto& r) { r.set_tensor_alignment(100); }, kCpu, absl::StatusCode::kInvalidArgument,
       "tensor_alignment = 100"},
      {[](auto& r) { r.add_tensor_offset(32); }, kCpu, absl::StatusCode::kInvalidArgument,
       "tensor_offset = 32"},
      {[](auto& r) { r.set_repeats_per_layout(2); }, kCpu, absl::StatusCode::kInvalidArgument,
       "repeats_per_layout applies only with randomize_layout"},
      {[](auto& r) {
         r.set_randomize_layout(true);
         r.set_repeat(30000);
         r.set_repeats_per_layout(2);
       },
       kCpu, absl::StatusCode::kInvalidArgument, "makes more than 10000 layouts"},
  };
  for (const Case& c : cases) {
    kprof::v1::TimeEvaluateRequest r = Spin();
    c.set(r);
    EXPECT_THAT(TimeJobFromRequest(r, c.device, 1000), StatusIs(c.code, HasSubstr(c.message)))
        << c.message;
  }
  // flush_l2 is for CUDA devices.
  kprof::v1::TimeEvaluateRequest r = Spin();
  r.set_flush_l2(true);
  EXPECT_THAT(TimeJobFromRequest(r, kCuda, 0), IsOk());

  // The placement and the mode reach the job.
  r = Spin();
  r.set_tensor_alignment(128);
  r.add_tensor_offset(384);
  r.set_huge_pages(true);
  r.set_cold(true);
  auto job = TimeJobFromRequest(r, kCpu, 0);
  ASSERT_THAT(job, IsOk());
  EXPECT_EQ(job->placement.alignment, 128u);
  EXPECT_EQ(job->placement.offsets, std::vector<uint32_t>{384});
  EXPECT_TRUE(job->placement.huge_pages);
  EXPECT_TRUE(job->cold);
  r = Spin();
  r.set_randomize_layout(true);
  r.set_repeats_per_layout(4);
  job = TimeJobFromRequest(r, kCpu, 0);
  ASSERT_THAT(job, IsOk());
  EXPECT_TRUE(job->placement.randomize);
  EXPECT_EQ(job->placement.repeats_per_layout, 4);
}

TEST(CheckJobOptions, ChecksEachKindOfJobAndItsCalls) {
  kprof::worker::v1::WorkerRequest request;
  *request.mutable_time_evaluate() = Spin();
  EXPECT_THAT(CheckJobOptions(request, kCpu), IsOk());
  request.mutable_time_evaluate()->mutable_call()->set_args(0, "float64[2,:1");
  EXPECT_THAT(CheckJobOptions(request, kCpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("float64[2,:1")));
  *request.mutable_time_evaluate() = Spin();
  request.mutable_time_evaluate()->mutable_call()->mutable_launch()->add_grid(1);
  EXPECT_THAT(CheckJobOptions(request, kCpu),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("launch.block has 0 dimensions (accepted: 1 to 3, x first)")));
  request.set_max_argument_bytes(100);
  *request.mutable_time_evaluate() = Spin();
  request.mutable_time_evaluate()->set_cache_flush_bytes(51);
  EXPECT_THAT(CheckJobOptions(request, kCpu), StatusIs(absl::StatusCode::kResourceExhausted));

  kprof::worker::v1::WorkerRequest profile;
  *profile.mutable_profile_function()->mutable_call() = Spin().call();
  EXPECT_THAT(CheckJobOptions(profile, kCpu), IsOk());
  profile.mutable_profile_function()->set_warmup(-1);
  EXPECT_THAT(CheckJobOptions(profile, kCpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("warmup = -1")));

  kprof::worker::v1::WorkerRequest sequence;
  EXPECT_THAT(CheckJobOptions(sequence, kCpu), IsOk());  // no job: the worker's to refuse
  *sequence.mutable_profile()->add_calls() = Spin().call();
  *sequence.mutable_profile()->add_calls() = Spin().call();
  EXPECT_THAT(CheckJobOptions(sequence, kCpu), IsOk());
  sequence.mutable_profile()->mutable_calls(1)->set_args(0, "int33:1");
  EXPECT_THAT(CheckJobOptions(sequence, kCpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("call 1 (spin_us): ")));
  sequence.mutable_profile()->mutable_calls(1)->set_args(0, "float64:1");
  sequence.mutable_profile()->set_repeat(0);
  EXPECT_THAT(CheckJobOptions(sequence, kCpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeat = 0")));
  sequence.mutable_profile()->clear_calls();
  sequence.mutable_profile()->set_repeat(1);
  EXPECT_THAT(CheckJobOptions(sequence, kCpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least one call")));
}

}  // namespace
}  // namespace kprof::server

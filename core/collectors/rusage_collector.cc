#include "core/collectors/rusage_collector.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace kprof::core {
namespace {

absl::StatusOr<rusage> ThreadUsage() {
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0) {
    return absl::InternalError(
        absl::StrCat("getrusage(RUSAGE_THREAD) failed: ", std::strerror(errno)));
  }
  return usage;
}

double Microseconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
}

class RusageMeasurement final : public MetricCollector::Measurement {
 public:
  explicit RusageMeasurement(const rusage& start) : start_(start) {}

  absl::StatusOr<report::MetricMap> Stop() override {
    const absl::StatusOr<rusage> stop = ThreadUsage();
    if (!stop.ok()) return stop.status();
    return report::MetricMap{
        {std::string(kUserTimeMetric),
         report::Duration{Microseconds(stop->ru_utime) - Microseconds(start_.ru_utime)}},
        {std::string(kSystemTimeMetric),
         report::Duration{Microseconds(stop->ru_stime) - Microseconds(start_.ru_stime)}},
        {std::string(kMinorFaultsMetric), report::Count{stop->ru_minflt - start_.ru_minflt}},
        {std::string(kMajorFaultsMetric), report::Count{stop->ru_majflt - start_.ru_majflt}},
        {std::string(kVoluntarySwitchesMetric), report::Count{stop->ru_nvcsw - start_.ru_nvcsw}},
        {std::string(kInvoluntarySwitchesMetric),
         report::Count{stop->ru_nivcsw - start_.ru_nivcsw}},
    };
  }

 private:
  rusage start_;
};

}  // namespace

absl::Status RusageCollector::Init(const std::vector<base::Device>&) { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<MetricCollector::Measurement>> RusageCollector::Start(base::Device) {
  const absl::StatusOr<rusage> start = ThreadUsage();
  if (!start.ok()) return start.status();
  return std::make_unique<RusageMeasurement>(*start);
}

}  // namespace kprof::core

#include "core/environment.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/config.h"

namespace kprof::core {
namespace {

using ::testing::MatchesRegex;

TEST(EnvironmentManifest, HasEveryFieldAndNoneEmpty) {
  const MetricMap m = EnvironmentManifest();
  for (const char* key : {"kprofd version", "Host", "Kernel", "CPU model", "CPUs online",
                          "CPU governor", "CPU frequency (MHz)", "SMT", "Turbo", "Load average",
                          "Runnable processes", "Worker CPU affinity", "Worker priority"}) {
    ASSERT_EQ(m.count(key), 1u) << key;
    if (const auto* s = std::get_if<std::string>(&m.at(key))) {
      EXPECT_FALSE(s->empty()) << key;
    }
  }
  EXPECT_EQ(m.at("kprofd version"), MetricValue(std::string(KPROF_VERSION)));
  EXPECT_GE(std::get<Count>(m.at("CPUs online")).value, 1);
  EXPECT_THAT(std::get<std::string>(m.at("Worker CPU affinity")),
              MatchesRegex("[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*"));
  EXPECT_THAT(std::get<std::string>(m.at("Worker priority")),
              MatchesRegex("SCHED_OTHER, nice -?[0-9]+|SCHED_(FIFO|RR), priority [0-9]+"));
  EXPECT_THAT(std::get<std::string>(m.at("Load average")),
              MatchesRegex("[0-9.]+, [0-9.]+, [0-9.]+"));
  EXPECT_THAT(std::get<std::string>(m.at("Kernel")), MatchesRegex("Linux .+"));
}

}  // namespace
}  // namespace kprof::core

#include "core/host/environment.h"

#include <set>
#include <string>

#include "core/host/platform.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/config.h"

namespace kprof::core {
namespace {

using ::testing::MatchesRegex;

TEST(EnvironmentManifest, HasEveryFieldAndNoneEmpty) {
  const report::MetricMap m = EnvironmentManifest();
  for (const char* key : {"kprofd version", "Host", "Kernel", "OS", "CPU model", "CPUs online",
                          "CPU governor", "CPU frequency (MHz)", "SMT", "Turbo", "Load average",
                          "Runnable processes", "Worker CPU affinity", "Worker priority"}) {
    ASSERT_EQ(m.count(key), 1u) << key;
    if (const auto* s = std::get_if<std::string>(&m.at(key))) {
      EXPECT_FALSE(s->empty()) << key;
    }
  }
  EXPECT_EQ(m.at("kprofd version"), report::MetricValue(std::string(KPROF_VERSION)));
  EXPECT_GE(std::get<report::Count>(m.at("CPUs online")).value, 1);
  EXPECT_THAT(std::get<std::string>(m.at("Worker CPU affinity")),
              MatchesRegex("[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*"));
  EXPECT_THAT(std::get<std::string>(m.at("Worker priority")),
              MatchesRegex("SCHED_OTHER, nice -?[0-9]+|SCHED_(FIFO|RR), priority [0-9]+"));
  EXPECT_THAT(std::get<std::string>(m.at("Load average")),
              MatchesRegex("[0-9.]+, [0-9.]+, [0-9.]+"));
  EXPECT_THAT(std::get<std::string>(m.at("Kernel")), MatchesRegex("Linux .+"));
  // The system as kprof info names it; "Jetson" only on a Jetson.
  EXPECT_EQ(std::get<std::string>(m.at("OS")), DescribeOs());
  EXPECT_EQ(m.count("Jetson"), DescribeJetson().empty() ? 0u : 1u);
}

TEST(ReadEnvironment, TheHostsPartAndTheJobsMakeTheManifestWithoutSharingAField) {
  const Environment environment = ReadEnvironment();
  ASSERT_NE(environment.host, nullptr);
  for (const char* key : {"kprofd version", "Host", "Kernel", "OS", "CPU model", "CPUs online",
                          "CPU governor", "SMT", "Turbo"}) {
    EXPECT_EQ(environment.host->count(key), 1u) << key;
    EXPECT_EQ(environment.job.count(key), 0u) << key;
  }
  for (const char* key : {"CPU frequency (MHz)", "Load average", "Runnable processes"}) {
    EXPECT_EQ(environment.job.count(key), 1u) << key;
    EXPECT_EQ(environment.host->count(key), 0u) << key;
  }
  std::set<std::string> together;
  for (const auto& [name, value] : *environment.host) together.insert(name);
  for (const auto& [name, value] : environment.job) {
    EXPECT_TRUE(together.insert(name).second) << name << " is in both parts";
  }
  std::set<std::string> manifest;
  for (const auto& [name, value] : EnvironmentManifest()) manifest.insert(name);
  EXPECT_EQ(together, manifest);
}

TEST(ReadEnvironment, TheHostsPartIsReadOnceAndSharedWhileItDoesNotChange) {
  const Environment first = ReadEnvironment();
  const Environment second = ReadEnvironment();
  // Within the second it is kept; when it is read again and found the same, its generation
  // stays, so a worker that sent it does not send it again.
  EXPECT_EQ(first.host_generation, second.host_generation);
  EXPECT_EQ(*first.host, *second.host);
  EXPECT_GE(first.host_generation, 1u);
}

}  // namespace
}  // namespace kprof::core

// kprofd's Prometheus metrics end to end: a real kprofd with --metrics-listen, its /metrics read
// over HTTP, and a real Prometheus server (Debian's) scraping it, its HTTP API seeing every
// counter move as jobs run, fail, crash their worker and time out, modules arrive and are
// evicted, and a batch stream stays open.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_get.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::HttpGet;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

constexpr char kToken[] = "metrics-test-secret-token";

// A port free now on 127.0.0.1.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<const sockaddr*>(&where), sizeof where);
  socklen_t size = sizeof where;
  getsockname(fd, reinterpret_cast<sockaddr*>(&where), &size);
  close(fd);
  return ntohs(where.sin_port);
}

// The lines of a /metrics text that begin with `name{` and hold every one of `labels`.
std::vector<std::string> Series(const std::string& text, const std::string& name,
                                const std::vector<std::string>& labels = {}) {
  std::vector<std::string> found;
  for (const absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, name + "{") && !absl::StartsWith(line, name + " ")) continue;
    bool all = true;
    for (const std::string& label : labels) all = all && absl::StrContains(line, label);
    if (all) found.emplace_back(line);
  }
  return found;
}

// The value of a series line ("name{...} 3").
double ValueOf(const std::string& line) {
  double value = -1;
  (void)absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value);
  return value;
}

// A Prometheus server scraping `target` every second, its data under `dir`.
class Prometheus {
 public:
  Prometheus(const std::string& dir, const std::string& target) {
    const std::string config = dir + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "scrape_configs:\n  - job_name: kprofd\n    static_configs:\n"
                          << "      - targets: ['" << target << "']\n";
    address_ = absl::StrCat("127.0.0.1:", FreePort());
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = dir + "/prometheus.log";
      freopen(log.c_str(), "w", stderr);
      execlp("prometheus", "prometheus", ("--config.file=" + config).c_str(),
             ("--storage.tsdb.path=" + dir + "/data").c_str(),
             ("--web.listen-address=" + address_).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Prometheus() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }

  // sum(`expression`) as Prometheus has it now; -1 while it has no such series.
  double Sum(const std::string& expression) const {
    std::string query;
    for (const char c : "sum(" + expression + ")") {
      query += std::isalnum(static_cast<unsigned char>(c)) || c == '_'
                   ? std::string(1, c)
                   : absl::StrFormat("%%%02X", static_cast<unsigned char>(c));
    }
    const std::string body = HttpGet(address_, "/api/v1/query?query=" + query);
    const Json answer = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (answer.is_discarded() || answer.value("status", "") != "success") return -1;
    const Json& result = answer["data"]["result"];
    if (!result.is_array() || result.empty()) return -1;
    double value = -1;
    (void)absl::SimpleAtod(result[0]["value"][1].get<std::string>(), &value);
    return value;
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/tokens") << kToken << " tuner-a\n";
    chmod(dir_.path().c_str(), 0755);
    chmod((dir_.path() + "/tokens").c_str(), 0644);
    ASSERT_TRUE(
        daemon_.Start(dir_.path() + "/cache",
                      {"--metrics-listen", "127.0.0.1:0", "--token-file", dir_.path() + "/tokens",
                       "--max-modules", "2", "--job-timeout", "1s"}))
        << "kprofd did not start, status " << daemon_.exit_status();
    client::ClientOptions options;
    options.bearer_token = kToken;
    auto connected = client::Client::Connect(daemon_.target(), options);
    ASSERT_THAT(connected, IsOk());
    client_ = std::move(*connected);
    auto info = client_->Info();
    ASSERT_THAT(info, IsOk());
    metrics_ = info->metrics();
    ASSERT_THAT(metrics_, ::testing::StartsWith("127.0.0.1:"));
    const auto cli = ::kprof::testing::RunKprof(
        daemon_.target(), "--token-file " + dir_.path() + "/tokens info", dir_.path());
    EXPECT_THAT(cli.out, HasSubstr("metrics: http://" + metrics_ + "/metrics")) << cli.err;
  }

  absl::Status Run(const std::string& module, const std::string& function) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(module);
    request.mutable_call()->set_function(function);
    request.set_repeat(2);
    return client_->TimeEvaluate(request).status();
  }

  std::string Load(const std::string& name) {
    auto module = client_->LoadModuleFile(TestModulePath(name));
    EXPECT_THAT(module, IsOk()) << name;
    return module.ok() ? module->id() : "";
  }

  TempDir dir_;
  Daemon daemon_;
  std::unique_ptr<client::Client> client_;
  std::string metrics_;
};

TEST_F(MetricsTest, MetricsNameEveryJobKindResultCauseAndClientButNoToken) {
  const std::string before = HttpGet(metrics_, "/metrics");
  ASSERT_THAT(before, HasSubstr("# TYPE kprofd_uploads_total counter"));
  EXPECT_THAT(before, HasSubstr("# TYPE kprofd_module_cache_bytes gauge"));
  EXPECT_THAT(Series(before, "kprofd_queue_length", {"device=\"cpu:0\""}), ::testing::SizeIs(1));
  EXPECT_THAT(Series(before, "kprofd_jobs_total"), ::testing::IsEmpty());

  const std::string error_code = Load("error_code");
  const std::string faults = Load("faults");
  EXPECT_THAT(Run("builtin", "nop"), IsOk());
  EXPECT_FALSE(Run(error_code, "fails").ok());
  EXPECT_FALSE(Run(faults, "segfault").ok());  // the worker dies: a crash
  EXPECT_FALSE(Run(faults, "hangs").ok());     // stopped at --job-timeout 1s
  v1::ProfileFunctionRequest profile;
  profile.mutable_call()->set_module_id("builtin");
  profile.mutable_call()->set_function("nop");
  EXPECT_THAT(client_->ProfileFunction(profile), IsOk());
  (void)Load("jitter");  // a third module, past --max-modules 2: one is evicted

  const std::string after = HttpGet(metrics_, "/metrics");
  const auto one = [&](const std::string& name, const std::vector<std::string>& labels) {
    const std::vector<std::string> lines = Series(after, name, labels);
    return lines.size() == 1 ? ValueOf(lines[0]) : -1.0;
  };
  EXPECT_EQ(one("kprofd_jobs_total", {"kind=\"time_evaluate\"", "result=\"OK\""}), 1) << after;
  EXPECT_EQ(one("kprofd_jobs_total", {"kind=\"time_evaluate\"", "result=\"ABORTED\""}), 2);
  EXPECT_EQ(one("kprofd_jobs_total", {"result=\"DEADLINE_EXCEEDED\""}), 1);
  EXPECT_EQ(one("kprofd_jobs_total", {"kind=\"profile_function\"", "result=\"OK\""}), 1);
  EXPECT_EQ(one("kprofd_client_jobs_total", {"client=\"tuner-a\""}), 5);
  EXPECT_EQ(one("kprofd_queue_wait_seconds_count", {"device=\"cpu:0\""}), 5);
  EXPECT_EQ(one("kprofd_execution_seconds_count", {"device=\"cpu:0\""}), 5);
  EXPECT_GE(one("kprofd_execution_seconds_sum", {"device=\"cpu:0\""}), 1.0);  // the hang's 1 s
  EXPECT_EQ(one("kprofd_worker_starts_total", {"cause=\"new\""}), 1);
  EXPECT_EQ(one("kprofd_worker_starts_total", {"cause=\"crash\""}), 1);
  EXPECT_EQ(one("kprofd_worker_starts_total", {"cause=\"timeout\""}), 1);
  EXPECT_EQ(one("kprofd_uploads_total", {}), 3);
  EXPECT_GT(one("kprofd_upload_bytes_total", {}), 3000);
  EXPECT_EQ(one("kprofd_module_cache_evictions_total", {}), 1);
  EXPECT_EQ(one("kprofd_module_cache_modules", {}), 2);
  EXPECT_GT(one("kprofd_module_cache_bytes", {}), 0);
  EXPECT_EQ(one("kprofd_batch_streams_open", {}), 0);
  EXPECT_EQ(one("kprofd_queue_length", {"device=\"cpu:0\""}), 0);
  EXPECT_THAT(after, Not(HasSubstr(kToken)));
}

TEST_F(MetricsTest, APrometheusServerSeesEveryCounterMove) {
  if (std::system("command -v prometheus > /dev/null") != 0) {
    GTEST_SKIP() << "no prometheus on PATH (deploy/install-deps.sh installs Debian's)";
  }
  Prometheus prometheus(dir_.path(), metrics_);
  EXPECT_THAT(Run("builtin", "nop"), IsOk());  // every job series exists from here on
  const std::vector<std::string> counters = {"kprofd_jobs_total",
                                             "kprofd_client_jobs_total",
                                             "kprofd_queue_wait_seconds_count",
                                             "kprofd_execution_seconds_count",
                                             "kprofd_worker_starts_total",
                                             "kprofd_uploads_total",
                                             "kprofd_upload_bytes_total",
                                             "kprofd_module_cache_evictions_total"};
  // Until it has scraped the daemon with that job counted.
  std::map<std::string, double> first;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (absl::Now() < give_up && prometheus.Sum("kprofd_jobs_total") < 1) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  for (const std::string& name : counters) first[name] = prometheus.Sum(name);
  ASSERT_GE(first["kprofd_jobs_total"], 1) << "Prometheus never saw the daemon's job";

  // A batch stream held open across a scrape.
  std::thread batch([&] {
    std::vector<v1::BatchJob> jobs(1);
    jobs[0].set_id("slow");
    jobs[0].mutable_time_evaluate()->mutable_call()->set_module_id("builtin");
    jobs[0].mutable_time_evaluate()->mutable_call()->set_function("sleep_us");
    jobs[0].mutable_time_evaluate()->mutable_call()->add_args("float64:400000");
    jobs[0].mutable_time_evaluate()->set_repeat(5);
    (void)client_->MeasureBatch(jobs, [](const v1::BatchUpdate&) {});
  });
  const std::string faults = Load("faults");
  (void)Load("error_code");
  (void)Load("jitter");  // evicts one
  EXPECT_FALSE(Run(faults, "segfault").ok());
  EXPECT_THAT(Run("builtin", "nop"), IsOk());
  bool stream_seen = false;
  std::map<std::string, double> now;
  while (absl::Now() < give_up) {
    stream_seen = stream_seen || prometheus.Sum("kprofd_batch_streams_open") >= 1;
    bool all = true;
    for (const std::string& name : counters) {
      now[name] = prometheus.Sum(name);
      all = all && now[name] > first[name];
    }
    if (all && stream_seen) break;
    absl::SleepFor(absl::Milliseconds(250));
  }
  batch.join();
  for (const std::string& name : counters) {
    EXPECT_GT(now[name], first[name]) << name << " did not move in Prometheus";
  }
  EXPECT_TRUE(stream_seen) << "Prometheus never saw the open batch stream";
  EXPECT_GE(prometheus.Sum("kprofd_module_cache_modules"), 1);
  EXPECT_GE(prometheus.Sum("kprofd_queue_length"), 0);
}

TEST(MetricsFlags, AnAddressItCannotUseIsRefusedSayingWhy) {
  TempDir dir;
  for (const auto& [address, says] : std::vector<std::pair<std::string, std::string>>{
           {"nowhere", "accepted: PORT, which is 127.0.0.1:PORT, or HOST:PORT"},
           {"0.0.0.0:0", "refusing to serve metrics on 0.0.0.0:0"}}) {
    Daemon daemon;
    const std::string log = dir.path() + "/kprofd.log";
    daemon.set_stderr(log);
    EXPECT_FALSE(daemon.Start(dir.path() + "/cache", {"--metrics-listen", address}));
    EXPECT_THAT(::kprof::testing::ReadFileBytes(log), HasSubstr(says)) << address;
  }
}

}  // namespace
}  // namespace kprof

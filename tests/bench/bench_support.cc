#include "bench_support.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "report/statistics.h"
#include "temp_dir.h"

namespace kprof::bench {

using kprof::report::Percentile;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::vector<Row> rows;

void Add(std::string section, std::string figure, std::string value, std::string reference,
         double ratio, std::string goal) {
  rows.push_back({std::move(section), std::move(figure), std::move(value), std::move(reference),
                  absl::StrFormat("%.3f", ratio), std::move(goal)});
  const Row& r = rows.back();
  std::printf("%-12s %-46s %-18s %-30s %8s  %s\n", r.section.c_str(), r.figure.c_str(),
              r.value.c_str(), r.reference.c_str(), r.ratio.c_str(), r.goal.c_str());
  std::fflush(stdout);
}

std::string Us(double seconds) { return absl::StrFormat("%.2f us", seconds * 1e6); }
std::string Ms(double seconds) { return absl::StrFormat("%.3f ms", seconds * 1e3); }
std::string Met(bool met) { return met ? "met" : "NOT met"; }

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "kprof_bench: %s\n", what.c_str());
  std::exit(1);
}

kprof::v1::TimeEvaluateRequest TimeRequest(const std::string& module, const std::string& function,
                                           const std::vector<std::string>& args) {
  kprof::v1::TimeEvaluateRequest request;
  request.mutable_call()->set_module_id(module);
  request.mutable_call()->set_function(function);
  for (const std::string& a : args) request.mutable_call()->add_args(a);
  return request;
}

std::vector<double> TimeCalls(int n, const std::function<void()>& call) {
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    call();
    seconds.push_back(Seconds(Clock::now() - start));
  }
  return seconds;
}

std::vector<double> ProcessPingPongs(int kRounds) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) Fail("socketpair");
  const pid_t echo = fork();
  if (echo == 0) {
    close(fds[0]);
    char buffer[1024];
    while (true) {
      size_t got = 0;
      while (got < sizeof buffer) {
        const ssize_t n = read(fds[1], buffer + got, sizeof buffer - got);
        if (n <= 0) _exit(0);
        got += static_cast<size_t>(n);
      }
      if (write(fds[1], buffer, sizeof buffer) != sizeof buffer) _exit(0);
    }
  }
  close(fds[1]);
  char buffer[1024] = {0};
  std::vector<double> rounds;
  for (int i = 0; i < kRounds; ++i) {
    const auto start = Clock::now();
    if (write(fds[0], buffer, sizeof buffer) != sizeof buffer) Fail("ping");
    size_t got = 0;
    while (got < sizeof buffer) {
      const ssize_t n = read(fds[0], buffer + got, sizeof buffer - got);
      if (n <= 0) Fail("pong");
      got += static_cast<size_t>(n);
    }
    rounds.push_back(Seconds(Clock::now() - start));
  }
  close(fds[0]);
  waitpid(echo, nullptr, 0);
  return rounds;
}

double ProcessPingPong() { return Percentile(ProcessPingPongs(5000), 50); }

std::string Candidate(const std::string& base, size_t size, int tag) {
  std::string bytes = base;
  std::string suffix = absl::StrFormat("kprof-bench-candidate-%d-%d", getpid(), tag);
  bytes += suffix;
  if (bytes.size() < size) bytes.resize(size, '\0');
  return bytes;
}

std::string Output(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) Fail("cannot run: " + command);
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  if (pclose(pipe) != 0) Fail("failed: " + command);
  return out;
}

std::string PythonOutput(const std::string& script) {
  kprof::testing::TempDir dir;
  const std::string path = dir.path() + "/script.py";
  std::ofstream(path) << script;
  return Output("/usr/bin/python3 " + path);
}

std::pair<int, double> PythonDoneAndSeconds(const std::string& script) {
  std::istringstream out(PythonOutput(script));
  std::pair<int, double> done_and_seconds{0, 0};
  out >> done_and_seconds.first >> done_and_seconds.second;
  return done_and_seconds;
}

Usage ProcessUsage(pid_t pid) {
  Usage usage;
  std::error_code error;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream schedstat(task.path() / "schedstat");
    double nanos = 0;
    if (schedstat >> nanos) usage.cpu += nanos * 1e-9;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) {
        usage.wakeups += std::stod(line.substr(line.find(':') + 1));
      }
    }
  }
  return usage;
}

std::string NopJobs(const std::string& dir, int n) {
  const std::string jobs = dir + "/nop.jsonl";
  std::ofstream out(jobs);
  for (int i = 0; i < n; ++i) {
    out << "{\"id\": \"j" << i
        << "\", \"module\": \"builtin\", \"function\": \"nop\", \"number\": 1, "
           "\"repeat\": 1}\n";
  }
  return jobs;
}

}  // namespace kprof::bench

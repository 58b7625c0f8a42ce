// kprof_demo: times a few compute loops on this host and prints the report three ways (table,
// CSV, standard JSON). `make demo` runs it.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/report.h"
#include "core/shape_string.h"

namespace {

using kprof::core::Count;
using kprof::core::Duration;
using kprof::core::MetricMap;
using kprof::core::Percent;
using kprof::core::Report;
using kprof::core::ShapeString;
using kprof::core::TensorShape;
using Clock = std::chrono::steady_clock;

// Keeps results alive so the compiler cannot drop the loops that made them.
volatile float g_sink;

void Matmul(int n) {
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < n; ++k) {
      const float aik = a[i * n + k];
      for (int j = 0; j < n; ++j) c[i * n + j] += aik * b[k * n + j];
    }
  }
  g_sink = c[n * n - 1];
}

void Sum(int n) {
  std::vector<float> x(n, 0.25f);
  float sum = 0;
  for (float v : x) sum += v;
  g_sink = sum;
}

double MicrosecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Job {
  std::string name;
  std::vector<TensorShape> shapes;
  std::function<void()> run;
  int calls;
};

}  // namespace

int main() {
  const std::vector<Job> jobs = {
      {"matmul", {{"float32", {256, 256}}, {"float32", {256, 256}}}, [] { Matmul(256); }, 3},
      {"matmul", {{"float32", {128, 128}}, {"float32", {128, 128}}}, [] { Matmul(128); }, 3},
      {"sum", {{"float32", {1 << 20}}}, [] { Sum(1 << 20); }, 5},
  };

  Report report;
  const Clock::time_point total_start = Clock::now();
  for (const Job& job : jobs) {
    for (int i = 0; i < job.calls; ++i) {
      const Clock::time_point start = Clock::now();
      job.run();
      report.calls.push_back({{"Name", job.name},
                              {"Duration (us)", Duration{MicrosecondsSince(start)}},
                              {"Count", Count{1}},
                              {"Device", std::string("cpu0")},
                              {"Argument Shapes", ShapeString(job.shapes)}});
    }
  }
  const double total_us = MicrosecondsSince(total_start);
  for (MetricMap& call : report.calls) {
    call["Percent"] =
        Percent{std::get<Duration>(call["Duration (us)"]).microseconds / total_us * 100};
  }
  report.device_metrics["cpu0"] = {
      {"Name", std::string("Total")}, {"Duration (us)", Duration{total_us}}, {"Count", Count{1}}};
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  report.configuration = {{"Number of threads", Count{1}},
                          {"Host", std::string(host)},
                          {"Timer", std::string("steady_clock")}};

  std::printf("%s\n", kprof::core::AsTable(report).c_str());
  std::printf("CSV\n---\n%s\n", kprof::core::AsCsv(report).c_str());
  std::printf("JSON\n----\n%s\n", kprof::core::AsJson(report).c_str());
  return 0;
}

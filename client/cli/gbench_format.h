// Google Benchmark's JSON (--benchmark_format=json) for kprof time and kprof batch
// (--format gbench), so that the tools that read it (compare.py, dashboards) read kprofd's
// measurements too.
//
// Each measurement is a benchmark named after its function and arguments
// ("spin_us/float64:100"; in a batch, the job's id first: "k0/gemm/float32[512,512]"): one run
// per repeat (its iterations the repeat's calls, its real_time the time per call), then the
// mean, median, stddev and cv aggregates as Google Benchmark computes them (stddev of a sample,
// cv a fraction). kprofd times wall clock, so cpu_time repeats real_time; the context says so.
// A failed job is a run with error_occurred and its error_message.
#pragma once

#include <string>
#include <vector>

#include "kprof/v1/kprof.pb.h"
#include "nlohmann/json.hpp"

namespace kprof::client {

// "FUNCTION/ARG/ARG...", with "ID/" first when `id` is not empty.
std::string GbenchName(const std::string& id, const kprof::v1::FunctionCall& call);

// The runs of one measurement: a run per repeat, then the aggregates.
nlohmann::ordered_json GbenchRuns(const std::string& name,
                                  const kprof::v1::TimeEvaluateResponse& response);

// The run of a job that failed.
nlohmann::ordered_json GbenchError(const std::string& name, const std::string& message);

// A whole file: the context (from `environment`, the manifest of a result, when given) and
// the runs.
nlohmann::ordered_json GbenchDocument(const kprof::v1::MetricMap* environment,
                                      nlohmann::ordered_json runs);

}  // namespace kprof::client

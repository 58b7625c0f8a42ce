// Conversions between the wire messages and core's types: Reports, statuses, device names.
// The one place where protobuf meets core; gRPC types never appear here (the worker links it).
#pragma once

#include "absl/status/status.h"
#include "kprof/v1/kprof.pb.h"
#include "report/report.h"

namespace kprof::wire {

kprof::v1::Report ToProto(const report::Report& report);

// INVALID_ARGUMENT when a metric has no value set (an empty oneof).
absl::StatusOr<report::Report> FromProto(const kprof::v1::Report& report);

// "name" or "name:opt,opt" — what core::CreateCollector takes.
std::string CollectorSpecText(const kprof::v1::CollectorSpec& spec);

void ToProto(const report::MetricMap& metrics, kprof::v1::MetricMap* out);
absl::StatusOr<report::MetricMap> FromProto(const kprof::v1::MetricMap& metrics,
                                            const std::string& where);

}  // namespace kprof::wire

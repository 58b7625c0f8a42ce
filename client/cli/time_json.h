// A timing's JSON members, written straight into a JsonLine: what `kprof time --format json`
// prints (as TimeJson's document) and every result line of `kprof batch` holds after the job's
// own keys. One writer for both, so that the two never differ.
#pragma once

#include "absl/status/status.h"
#include "client/cli/json_line.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::client {

// The members of `r`'s object, in the order TVM's BenchmarkResult keys then kprofd's; into an
// object `line` has open. INVALID_ARGUMENT when its environment does not read (a metric without
// a value), with nothing of the environment written.
absl::Status WriteTimeMembers(const kprof::v1::TimeEvaluateResponse& r, JsonLine& line);

}  // namespace kprof::client

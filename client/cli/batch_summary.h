// BatchSummary: what `kprof batch --format table` (or csv) prints once the batch is over, in
// place of a JSON line per job: a row per job line, in the lines' order — its id, the call, the
// median, the relative standard deviation, the repeats, its status — with a failed job's reason
// or a measurement's first warning beneath its row, and the tally.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::client {

class BatchSummary {
 public:
  // `call`: the function and its arguments as the line gave them ("spin_us float64:100").
  void Done(int64_t line, const std::string& id, const std::string& call,
            const kprof::v1::TimeEvaluateResponse& result, const std::string& daemon);
  void Failed(int64_t line, const std::string& id, const std::string& call,
              const absl::Status& status);

  // Columns two spaces apart, the call cut to fit 100 columns; a daemon column where more than
  // one daemon measured.
  std::string Table() const;
  // The table's columns in its order, numbers in seconds and fractions, the note last.
  std::string Csv() const;

 private:
  struct Row {
    std::string id, call, status, daemon, note;
    double median = 0, relative_std = 0;  // NaN where the job failed
    int64_t repeats = 0;
  };
  bool SeveralDaemons() const;

  std::map<int64_t, Row> rows_;  // by line
};

}  // namespace kprof::client

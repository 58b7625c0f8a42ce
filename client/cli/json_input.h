// Reading the JSON that users hand the CLI (job lines, result files, Google Benchmark's
// output): nesting bounded, so that no file can overflow the stack of whatever walks or writes
// it, and values echoed in an error at a length a terminal holds.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kprof::client {

// How deep the CLI's inputs may nest: kprof's own outputs nest 5 levels, Google Benchmark's 4.
inline constexpr int kMaxInputDepth = 64;

// `text` parsed, discarded (is_discarded()) when it is not JSON. A value nested deeper than
// kMaxInputDepth is not built: `*too_deep` is set, and the caller refuses the whole.
nlohmann::ordered_json ParseInput(absl::string_view text, bool* too_deep);

// `value` as JSON, cut to 60 characters ("...", and how long it was, after them).
std::string Echo(const nlohmann::ordered_json& value);

}  // namespace kprof::client

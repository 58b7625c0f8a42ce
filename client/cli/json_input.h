// Reading the JSON that users hand the CLI (job lines, result files, Google Benchmark's
// output): nesting bounded, so that no file can overflow the stack of whatever walks or writes
// it, and values echoed in an error at a length a terminal holds.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace kprof::client {

// How deep the CLI's inputs may nest: kprof's own outputs nest 5 levels, Google Benchmark's 4.
inline constexpr int kMaxInputDepth = 64;

// `text` parsed, discarded (is_discarded()) when it is not JSON. A value nested deeper than
// kMaxInputDepth is not built: `*too_deep` is set, and the caller refuses the whole.
nlohmann::ordered_json ParseInput(absl::string_view text, bool* too_deep);

// The members of `object` into `message` as protobuf's JsonStringToMessage reads them (the
// message cleared first; fields by their proto or JSON names). Singular scalar fields given
// values of their own type are set straight — a batch reads thousands of lines, and protobuf's
// JSON parser cost more than the rest of a line; anything else goes through protobuf's parser,
// whose message an error carries.
absl::Status JsonToMessage(const nlohmann::ordered_json& object,
                           google::protobuf::Message* message);

// `value` as JSON, cut to 60 characters ("...", and how long it was, after them).
std::string Echo(const nlohmann::ordered_json& value);

}  // namespace kprof::client

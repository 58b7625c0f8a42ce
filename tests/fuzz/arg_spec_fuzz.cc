// Fuzz target: the argument-spec parser must answer every string with a spec or
// INVALID_ARGUMENT — never a crash, a hang or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/args/arg_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto spec = kprof::core::ParseArgSpec(text);
  if (!spec.ok() && spec.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (spec.ok() && spec->num_elements < 0) std::abort();
  return 0;
}

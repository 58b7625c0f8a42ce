// Fuzz target: the ELF inspector reads only inside the buffer and answers every input with a
// function list or INVALID_ARGUMENT.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/modules/elf_inspector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto info = kprof::core::InspectSharedLibrary(bytes);
  if (!info.ok() && info.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (info.ok() && info->functions.empty()) std::abort();
  return 0;
}

// Fuzz target: module inspection — the host ELF inspector, the cubin reader and the format
// sniffing around them — reads only inside the buffer and answers every input with a
// description or INVALID_ARGUMENT.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/modules/elf_inspector.h"
#include "core/modules/module_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto info = kprof::core::InspectSharedLibrary(bytes);
  if (!info.ok() && info.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (info.ok() && info->functions.empty()) std::abort();
  const auto kernels = kprof::core::CubinKernels(bytes);
  if (!kernels.ok() && kernels.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (kernels.ok() && kernels->empty()) std::abort();
  const auto described = kprof::core::DescribeModule(bytes, "auto");
  if (!described.ok() && described.status().code() != absl::StatusCode::kInvalidArgument) {
    std::abort();
  }
  return 0;
}

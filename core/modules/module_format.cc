#include "core/modules/module_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/cuda/cuda_image.h"
#include "core/modules/elf_inspector.h"

namespace kprof::core {

bool IsCudaFormat(std::string_view format) {
  return format == "cubin" || format == "fatbin" || format == "ptx";
}

bool IsModuleFormat(std::string_view format) {
  return format.empty() || format == "auto" || format == kSharedLibraryFormat ||
         IsCudaFormat(format);
}

absl::StatusOr<ModuleDescription> DescribeModule(std::string_view bytes,
                                                 std::string_view declared) {
  if (!IsModuleFormat(declared)) {
    return absl::InvalidArgumentError(
        absl::StrCat("module format '", std::string(declared),
                     "' is unknown (accepted: auto, shared-library, cubin, fatbin, ptx)"));
  }
  const std::optional<CudaImageKind> cuda = SniffCudaImage(bytes);
  const bool automatic = declared.empty() || declared == "auto";
  if (!automatic && IsCudaFormat(declared) && (!cuda || CudaImageKindName(*cuda) != declared)) {
    return absl::InvalidArgumentError(
        absl::StrCat("declared ", std::string(declared), ", but the bytes are ",
                     cuda ? std::string(CudaImageKindName(*cuda)) : "not CUDA code"));
  }
  ModuleDescription description;
  if (cuda && (automatic || IsCudaFormat(declared))) {
    description.format = std::string(CudaImageKindName(*cuda));
    switch (*cuda) {
      case CudaImageKind::kCubin: {
        absl::StatusOr<std::vector<std::string>> kernels = CubinKernels(bytes);
        if (!kernels.ok()) return kernels.status();
        description.functions = *std::move(kernels);
        break;
      }
      case CudaImageKind::kPtx:
        description.functions = PtxKernels(bytes);
        if (description.functions.size() > 100'000) {
          return absl::InvalidArgumentError("invalid PTX module: more than 100000 kernels");
        }
        if (description.functions.empty()) {
          return absl::InvalidArgumentError("invalid PTX module: it declares no .entry kernel");
        }
        break;
      case CudaImageKind::kFatbin: {
        // The driver is given a pointer, not a length: it trusts the header's size, so a
        // fatbin whose header claims more than was uploaded is refused here.
        if (bytes.size() < 16)
          return absl::InvalidArgumentError("invalid fatbin: truncated header");
        uint16_t header = 0;
        uint64_t size = 0;
        std::memcpy(&header, bytes.data() + 6, sizeof header);
        std::memcpy(&size, bytes.data() + 8, sizeof size);
        if (header < 16 || size > bytes.size() || header > bytes.size() - size) {
          return absl::InvalidArgumentError(absl::StrCat("invalid fatbin: its header claims ",
                                                         header, " + ", size,
                                                         " bytes, the upload has ", bytes.size()));
        }
        break;  // its kernels are listed by the device that loads it
      }
    }
    return description;
  }
  absl::StatusOr<SharedLibraryInfo> library = InspectSharedLibrary(bytes);
  if (!library.ok()) return library.status();
  description.format = std::string(kSharedLibraryFormat);
  description.functions = std::move(library->functions);
  return description;
}

}  // namespace kprof::core

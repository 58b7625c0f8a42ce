#include "core/modules/module_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

bool IsPrintableUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    // The length of the sequence, and the least code point it may encode (no overlong forms).
    size_t length = 0;
    uint32_t code = 0, least = 0;
    if ((c & 0xE0) == 0xC0) {
      length = 2, code = c & 0x1F, least = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code = c & 0x0F, least = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code = c & 0x07, least = 0x10000;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF) ||
        (code >= 0x80 && code <= 0x9F)) {
      return false;
    }
    i += length;
  }
  return true;
}

std::string QuoteBytes(std::string_view text) {
  std::string quoted = "'";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      quoted.push_back(ch);
    } else {
      absl::StrAppend(&quoted, absl::StrFormat("\\x%02x", c));
    }
  }
  return quoted + "'";
}

namespace {

// Every name a module exports must be printable UTF-8: it goes into the protocol's strings
// (which must be UTF-8) and onto terminals.
absl::Status CheckFunctionNames(const std::vector<std::string>& functions) {
  for (const std::string& name : functions) {
    if (!IsPrintableUtf8(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the module exports the name ", QuoteBytes(name.substr(0, 200)),
          ", which is not printable UTF-8 (accepted: UTF-8 without control characters)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

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
    if (absl::Status s = CheckFunctionNames(description.functions); !s.ok()) return s;
    return description;
  }
  absl::StatusOr<SharedLibraryInfo> library = InspectSharedLibrary(bytes);
  if (!library.ok()) return library.status();
  description.format = std::string(kSharedLibraryFormat);
  description.functions = std::move(library->functions);
  if (absl::Status s = CheckFunctionNames(description.functions); !s.ok()) return s;
  return description;
}

}  // namespace kprof::core

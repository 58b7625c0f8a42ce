#include "core/cuda/cuda_image.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

namespace kprof::core {
namespace {

constexpr uint16_t kEmCuda = 190;
constexpr uint32_t kFatbinMagic = 0xBA55ED50;

uint32_t LittleEndian32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes[at + static_cast<size_t>(i)]);
  }
  return value;
}

bool IsPtx(std::string_view bytes) {
  // PTX is ASCII text; a NUL or other control byte (other than whitespace) rules it out.
  const std::string_view head = bytes.substr(0, 4096);
  for (char c : head) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0 || (u < 0x20 && c != '\n' && c != '\r' && c != '\t') || u >= 0x80) return false;
  }
  return bytes.find(".version") != std::string_view::npos &&
         bytes.find(".target") != std::string_view::npos;
}

}  // namespace

std::string_view CudaImageKindName(CudaImageKind kind) {
  switch (kind) {
    case CudaImageKind::kCubin:
      return "cubin";
    case CudaImageKind::kFatbin:
      return "fatbin";
    case CudaImageKind::kPtx:
      break;
  }
  return "ptx";
}

std::vector<std::string> PtxKernels(std::string_view ptx) {
  std::vector<std::string> kernels;
  constexpr std::string_view kEntry = ".entry";
  for (size_t at = ptx.find(kEntry); at != std::string_view::npos;
       at = ptx.find(kEntry, at + kEntry.size())) {
    // A directive, not part of a longer word or a comment's text: preceded by a blank or a line
    // start, followed by a blank.
    const bool starts = at == 0 || ptx[at - 1] == ' ' || ptx[at - 1] == '\t' || ptx[at - 1] == '\n';
    size_t name = at + kEntry.size();
    if (!starts || name >= ptx.size() || (ptx[name] != ' ' && ptx[name] != '\t')) continue;
    // Not in a line comment.
    const size_t line = ptx.rfind('\n', at);
    const size_t line_start = line == std::string_view::npos ? 0 : line + 1;
    if (ptx.substr(line_start, at - line_start).find("//") != std::string_view::npos) continue;
    while (name < ptx.size() && (ptx[name] == ' ' || ptx[name] == '\t')) ++name;
    size_t end = name;
    while (end < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[end])) ||
                                ptx[end] == '_' || ptx[end] == '$' || ptx[end] == '%')) {
      ++end;
    }
    if (end > name) kernels.emplace_back(ptx.substr(name, end - name));
  }
  std::sort(kernels.begin(), kernels.end());
  kernels.erase(std::unique(kernels.begin(), kernels.end()), kernels.end());
  return kernels;
}

std::optional<CudaImageKind> SniffCudaImage(std::string_view bytes) {
  if (bytes.size() >= 20 && bytes.substr(0, 4) ==
                                "\x7f"
                                "ELF") {
    // e_machine: 2 bytes at offset 18, in the file's byte order (EI_DATA, offset 5).
    const auto lo = static_cast<uint8_t>(bytes[18]), hi = static_cast<uint8_t>(bytes[19]);
    const uint16_t machine =
        bytes[5] == 2 ? static_cast<uint16_t>(lo << 8 | hi) : static_cast<uint16_t>(hi << 8 | lo);
    if (machine == kEmCuda) return CudaImageKind::kCubin;
    return std::nullopt;
  }
  if (bytes.size() >= 8 && LittleEndian32(bytes, 0) == kFatbinMagic) return CudaImageKind::kFatbin;
  if (IsPtx(bytes)) return CudaImageKind::kPtx;
  return std::nullopt;
}

}  // namespace kprof::core

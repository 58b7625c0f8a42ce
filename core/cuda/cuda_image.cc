#include "core/cuda/cuda_image.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <set>

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
  // One pass, line by line: the part of a line before "//" is code; in it, ".entry" as a
  // word, then blanks, then the kernel's name.
  constexpr std::string_view kEntry = ".entry";
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  const auto name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%';
  };
  std::set<std::string, std::less<>> kernels;
  size_t line_start = 0;
  while (line_start < ptx.size()) {
    size_t line_end = ptx.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = ptx.size();
    std::string_view code = ptx.substr(line_start, line_end - line_start);
    code = code.substr(0, code.find("//"));
    for (size_t at = code.find(kEntry); at != std::string_view::npos;
         at = code.find(kEntry, at + kEntry.size())) {
      size_t name = at + kEntry.size();
      if ((at > 0 && !blank(code[at - 1])) || name >= code.size() || !blank(code[name])) continue;
      while (name < code.size() && blank(code[name])) ++name;
      size_t end = name;
      while (end < code.size() && name_char(code[end])) ++end;
      if (end > name) kernels.emplace(code.substr(name, end - name));
    }
    line_start = line_end + 1;
  }
  return std::vector<std::string>(kernels.begin(), kernels.end());
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

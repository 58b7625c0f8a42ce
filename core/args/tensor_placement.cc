#include "core/args/tensor_placement.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace kprof::core {
namespace {

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

absl::Status CheckPlacement(const PlacementOptions& p, size_t tensors) {
  if (!IsPowerOfTwo(p.alignment) || p.alignment < kMinTensorAlignment ||
      p.alignment > kMaxTensorAlignment) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor_alignment = ", p.alignment,
                     " is out of range (accepted: a power of two from 64 to 2097152 bytes)"));
  }
  if (p.offsets.size() > 1 && p.offsets.size() != tensors) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor_offset has ", p.offsets.size(), " values for ", tensors,
                     " arguments (accepted: one for all of them, or one per argument)"));
  }
  for (uint32_t offset : p.offsets) {
    const uint64_t step = RandomOffsetStep(p);
    if (offset >= kPageBytes || offset % kMinTensorAlignment != 0 ||
        (p.alignment < kPageBytes && offset % p.alignment != 0) ||
        (p.alignment >= kPageBytes && offset != 0)) {
      const std::string accepted =
          p.alignment >= kPageBytes
              ? absl::StrCat("0 with tensor_alignment = ", p.alignment)
              : absl::StrCat("a multiple of ", step, " under 4096, bytes past a page boundary");
      return absl::InvalidArgumentError(
          absl::StrCat("tensor_offset = ", offset, " is out of range (accepted: ", accepted, ")"));
    }
  }
  if (p.repeats_per_layout < 1) {
    return absl::InvalidArgumentError(absl::StrCat("repeats_per_layout = ", p.repeats_per_layout,
                                                   " is out of range (accepted: 1 or more)"));
  }
  if (p.repeats_per_layout > 1 && !p.randomize) {
    return absl::InvalidArgumentError(
        "repeats_per_layout applies only with randomize_layout, which places the tensors afresh");
  }
  if (p.first_layout_repeat < 0 || p.first_layout_repeat > (int64_t{1} << 53)) {
    return absl::InvalidArgumentError(absl::StrCat("first_layout_repeat = ", p.first_layout_repeat,
                                                   " is out of range (accepted: 0 to 2^53)"));
  }
  if (p.first_layout_repeat > 0 && !p.randomize) {
    return absl::InvalidArgumentError(
        "first_layout_repeat applies only with randomize_layout, whose layouts it continues");
  }
  if (p.randomize && !p.offsets.empty()) {
    return absl::InvalidArgumentError(
        "randomize_layout chooses the offsets itself: give it or tensor_offset, not both");
  }
  if (p.randomize && p.alignment >= kPageBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "randomize_layout moves tensors within a page; tensor_alignment = ", p.alignment,
        " leaves them one place (accepted with it: under 4096)"));
  }
  return absl::OkStatus();
}

uint64_t RandomOffsetStep(const PlacementOptions& p) {
  return p.alignment < kPageBytes ? std::max(kMinTensorAlignment, p.alignment) : kPageBytes;
}

uint64_t OffsetOf(const PlacementOptions& p, size_t index) {
  if (p.offsets.size() == 1) return p.offsets[0];
  if (!p.offsets.empty()) return p.offsets[index];
  if (p.alignment >= kPageBytes) return 0;
  const uint64_t step = std::max(kDefaultOffsetStep, p.alignment);
  return (index * step) % kPageBytes;
}

TensorPlace PlaceOf(const void* data, uint64_t alignment) {
  const auto address = reinterpret_cast<uintptr_t>(data);
  const uint64_t cap = std::max(alignment, kPageBytes);
  uint64_t largest = cap;
  if (address % cap != 0) largest = address & (~address + 1);  // the lowest set bit
  return {largest, address % kPageBytes};
}

std::string HugePagesUnavailable(const std::string& root) {
  std::ifstream in(root + "/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream text;
  text << in.rdbuf();
  const std::string modes = text.str();
  if (!in && modes.empty()) return "this host has no transparent huge pages (no sysfs setting)";
  if (modes.find("[always]") != std::string::npos || modes.find("[madvise]") != std::string::npos) {
    return "";
  }
  return "transparent huge pages are off on this host (never)";
}

std::string DescribePlacement(const std::vector<TensorPlace>& places) {
  std::string text;
  for (const TensorPlace& place : places) {
    absl::StrAppend(&text, text.empty() ? "" : ", ", "+", place.offset, " (aligned ",
                    place.alignment, ")");
  }
  return text;
}

}  // namespace kprof::core

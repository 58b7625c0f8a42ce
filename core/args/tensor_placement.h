// Tensor placement: where in memory a job's tensors lie, chosen on purpose rather than left to
// the allocator, because a kernel's time can move with it. Two tensors whose addresses agree in
// their low 12 bits make loads from one wait on stores to the other on many x86 cores (4K
// aliasing); cache sets and DRAM banks follow address bits too. See docs/BENCHMARKS.md.
//
// Each tensor's data starts `offset` bytes past a boundary of max(alignment, 4096): its address
// is a multiple of `alignment` and lies `offset` bytes past a 4096-byte page boundary.
//
//   PlacementOptions placement;          // the defaults: alignment 64, staggered offsets
//   placement.offsets = {0};             // every tensor page-aligned
//   KPROF_RETURN_IF_ERROR(CheckPlacement(placement, specs.size()));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kprof::core {

inline constexpr uint64_t kPageBytes = 4096;
inline constexpr uint64_t kMinTensorAlignment = 64;  // a cache line: what vector code assumes
inline constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;
inline constexpr uint64_t kMaxTensorAlignment = kHugePageBytes;

// The step of default offsets: argument k lies at (k × 256) mod 4096 past a page boundary, so
// that no two of a job's first 16 tensors share their low 12 address bits.
inline constexpr uint64_t kDefaultOffsetStep = 256;

// The most layouts one randomized evaluation reports (repeats / repeats_per_layout).
inline constexpr int64_t kMaxLayouts = 10'000;

struct PlacementOptions {
  uint64_t alignment = kMinTensorAlignment;  // a power of two, 64 to 2 MiB
  // Bytes past a page boundary, each a multiple of 64 and of the alignment (when it is under a
  // page), under 4096: none (the staggered default), one for every tensor, or one per tensor.
  std::vector<uint32_t> offsets;
  bool huge_pages = false;  // CPU: ask for transparent huge pages (madvise), aligned to 2 MiB
  // Place the tensors afresh at random offsets (steps of max(64, alignment) within a page)
  // every `repeats_per_layout` repeats, their contents kept.
  bool randomize = false;
  int64_t repeats_per_layout = 1;  // >= 1, with randomize only
  // Draw the layouts of repeats first_layout_repeat on: a job that takes over a measurement's
  // repeats from there goes on through its sequence of layouts (>= 0, with randomize only).
  int64_t first_layout_repeat = 0;
};

// INVALID_ARGUMENT naming the first option out of range and what is accepted; `tensors` is how
// many tensors the job has (for the count of offsets).
absl::Status CheckPlacement(const PlacementOptions& placement, size_t tensors);

// The offset argument `index` takes under `placement` (already checked).
uint64_t OffsetOf(const PlacementOptions& placement, size_t index);

// The step of random offsets: max(64, alignment) when the alignment is under a page.
uint64_t RandomOffsetStep(const PlacementOptions& placement);

// Where one tensor lies: the largest power of two its address is a multiple of (at most the
// larger of the page and the requested alignment), and its distance past a page boundary.
struct TensorPlace {
  uint64_t alignment = 0;
  uint64_t offset = 0;
};
TensorPlace PlaceOf(const void* data, uint64_t alignment);

// "+0 (aligned 4096), +256 (aligned 256)": each tensor's offset past a page boundary and its
// alignment, for a report's rows.
std::string DescribePlacement(const std::vector<TensorPlace>& places);

// Whether a madvise(MADV_HUGEPAGE) region may get transparent huge pages on this host, read from
// `root`/sys/kernel/mm/transparent_hugepage/enabled: empty when it may, otherwise why not
// ("transparent huge pages are off on this host (never)").
std::string HugePagesUnavailable(const std::string& root = "/");

}  // namespace kprof::core

#include "core/args/arguments.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "core/args/data_type.h"
#include "core/args/random.h"

namespace kprof::core {
namespace {

// Stores one element of `type` at `out` — `real` when `use_real` (float fills), else `integer`:
// integers wrap (two's complement), floats round to nearest, bool is value != 0.
void StoreNumber(DLDataType type, double real, uint64_t integer, bool use_real, void* out) {
  const auto as_float = [&]() { return use_real ? real : static_cast<double>(integer); };
  if (IsBool(type)) {
    const uint8_t b = use_real ? real != 0 : integer != 0;
    std::memcpy(out, &b, 1);
  } else if (type.code == kDLBfloat) {
    const uint16_t h = DoubleToBfloat16(as_float());  // rounded once, from the exact value
    std::memcpy(out, &h, 2);
  } else if (IsFloat(type) && type.bits == 16) {
    const uint16_t h = DoubleToHalf(as_float());
    std::memcpy(out, &h, 2);
  } else if (IsFloat(type) && type.bits == 32) {
    const auto f = static_cast<float>(as_float());
    std::memcpy(out, &f, 4);
  } else if (IsFloat(type)) {
    const double d = as_float();
    std::memcpy(out, &d, 8);
  } else {
    // Little-endian hosts: the low bytes of the 64-bit pattern are the narrower integer.
    std::memcpy(out, &integer, ElementBytes(type));
  }
}

void StoreRandom(DLDataType type, uint64_t bits, void* out) {
  if (IsBool(type)) {
    const auto b = static_cast<uint8_t>(bits >> 63);
    std::memcpy(out, &b, 1);
  } else if (IsFloat(type) && type.bits == 64) {
    const double d = static_cast<double>(bits >> 11) * 0x1p-53;
    std::memcpy(out, &d, 8);
  } else if (IsFloat(type)) {
    const float f = static_cast<float>(bits >> 40) * 0x1p-24f;
    if (type.bits == 32) {
      std::memcpy(out, &f, 4);
    } else {
      const uint16_t h = type.code == kDLBfloat ? FloatToBfloat16(f, /*toward_zero=*/true)
                                                : FloatToHalf(f, /*toward_zero=*/true);
      std::memcpy(out, &h, 2);
    }
  } else {
    const uint64_t v = bits >> 60;
    std::memcpy(out, &v, ElementBytes(type));
  }
}

}  // namespace

void InitializeHostBytes(const ArgSpec& spec, uint64_t seed, uint64_t index, void* out) {
  auto* bytes = static_cast<unsigned char*>(out);
  const size_t width = ElementBytes(spec.dtype);
  const auto n = static_cast<uint64_t>(spec.num_elements);
  switch (spec.init) {
    case ArgInit::kZeros:
      std::memset(out, 0, spec.num_bytes);
      return;
    case ArgInit::kOnes:
      for (uint64_t i = 0; i < n; ++i) StoreNumber(spec.dtype, 1, 1, false, bytes + i * width);
      return;
    case ArgInit::kArange:
      for (uint64_t i = 0; i < n; ++i) StoreNumber(spec.dtype, 0, i, false, bytes + i * width);
      return;
    case ArgInit::kFill: {
      const bool real = IsFloat(spec.dtype);
      const uint64_t integer = IsUnsigned(spec.dtype) ? spec.fill.unsigned_integer
                                                      : static_cast<uint64_t>(spec.fill.integer);
      if (n == 0) return;
      StoreNumber(spec.dtype, spec.fill.real, integer, real, bytes);
      for (uint64_t i = 1; i < n; ++i) std::memcpy(bytes + i * width, bytes, width);
      return;
    }
    case ArgInit::kRandom:
      for (uint64_t i = 0; i < n; ++i) {
        StoreRandom(spec.dtype, RandomBits(seed, index, i), bytes + i * width);
      }
      return;
  }
}

absl::StatusOr<std::unique_ptr<Arguments>> Arguments::Allocate(const std::vector<ArgSpec>& specs,
                                                               uint64_t seed, base::Device device,
                                                               const ArgumentLimits& limits,
                                                               const PlacementOptions& placement) {
  uint64_t total = 0;
  for (const ArgSpec& spec : specs) {
    if (__builtin_add_overflow(total, spec.num_bytes, &total) || total > limits.max_total_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("the arguments need more than the limit of ",
                                                       limits.max_total_bytes,
                                                       " bytes per job (at '", spec.text, "')"));
    }
  }
  KPROF_RETURN_IF_ERROR(CheckPlacement(placement, specs.size()));
  // The room placement takes counts too: at 2 MiB alignment or on huge pages, megabytes a
  // tensor, which many small arguments would multiply past the limit.
  const bool huge = placement.huge_pages && device.type == base::DeviceType::kCpu;
  const uint64_t boundary = std::max({placement.alignment, kPageBytes, huge ? kHugePageBytes : 0});
  uint64_t span_total = 0;
  for (const ArgSpec& spec : specs) {
    const uint64_t span = Span(spec, boundary, huge);
    if (span == 0 || __builtin_add_overflow(span_total, span, &span_total)) {
      span_total = UINT64_MAX;
      break;
    }
  }
  if (span_total > limits.max_total_bytes) {
    // What would take less: the room is at least a page whatever the alignment under one.
    std::string less = placement.alignment > kPageBytes ? "a smaller tensor_alignment, " : "";
    if (huge) absl::StrAppend(&less, "no huge_pages, ");
    return absl::ResourceExhaustedError(
        absl::StrCat("the arguments and the room to place them need more than the limit of ",
                     limits.max_total_bytes, " bytes per job (", total, " bytes of data, ",
                     span_total, " with each tensor's room to lie at its offset past a ", boundary,
                     "-byte boundary", huge ? " in whole 2 MiB pages" : "", "): ", less,
                     "or a larger --max-argument-bytes ", "takes them"));
  }
  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(device.type));
  KPROF_ASSIGN_OR_RETURN(DeviceApi * host_api, GetDeviceApi(base::DeviceType::kCpu));
  std::unique_ptr<Arguments> args(new Arguments(specs, device, api, host_api));
  args->alignment_ = placement.alignment;
  args->huge_pages_ = placement.huge_pages && device.type == base::DeviceType::kCpu;

  std::vector<unsigned char> staging;  // host copy for devices whose memory the host cannot write
  for (size_t k = 0; k < args->specs_.size(); ++k) {
    KPROF_RETURN_IF_ERROR(args->Place(k, placement));  // owned from here: freed on any error
    // Every byte is written here, so no first-touch fault is left for a timed call.
    KPROF_RETURN_IF_ERROR(args->Initialize(k, seed, staging));
  }
  return args;
}

absl::Status Arguments::Initialize(size_t k, uint64_t seed, std::vector<unsigned char>& staging) {
  const ArgSpec& spec = specs_[k];
  const DLTensor& tensor = tensors_[k];
  if (OnHost(tensor)) {
    InitializeHostBytes(spec, seed, k, tensor.data);
    return absl::OkStatus();
  }
  if (spec.init == ArgInit::kZeros) return api_->Memset(device_, tensor.data, 0, spec.num_bytes);
  staging.resize(spec.num_bytes);
  InitializeHostBytes(spec, seed, k, staging.data());
  return api_->Copy(device_, tensor.data, staging.data(), spec.num_bytes, CopyKind::kHostToDevice);
}

absl::Status Arguments::Refill(uint64_t seed) {
  std::vector<unsigned char> staging;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    KPROF_RETURN_IF_ERROR(Initialize(k, seed, staging));
  }
  return absl::OkStatus();
}

absl::Status Arguments::Poison(size_t k) {
  const ArgSpec& spec = specs_.at(k);
  // All ones is a NaN in every floating-point format (its exponent all ones, its mantissa not 0).
  const int pattern = IsFloat(spec.dtype) ? 0xff : kPoisonByte;
  if (OnHost(tensors_[k])) {
    std::memset(tensors_[k].data, pattern, spec.num_bytes);
    return absl::OkStatus();
  }
  return api_->Memset(device_, tensors_[k].data, pattern, spec.num_bytes);
}

absl::StatusOr<uint64_t> Arguments::Fingerprint(size_t k) const {
  const ArgSpec& spec = specs_.at(k);
  if (OnHost(tensors_[k])) {
    return absl::HashOf(
        std::string_view(static_cast<const char*>(tensors_[k].data), spec.num_bytes));
  }
  std::string host(spec.num_bytes, '\0');
  KPROF_RETURN_IF_ERROR(ReadBack(k, host.data()));
  return absl::HashOf(host);
}

absl::Status Arguments::Place(size_t k, const PlacementOptions& placement) {
  ArgSpec& spec = specs_[k];  // the tensor points at its shape
  DLTensor tensor{};
  // Scalars live in host memory on every device: kernels take them by value, and a host
  // function reads them without a copy.
  const bool on_host = device_.type == base::DeviceType::kCpu || spec.shape.empty();
  const base::Device where = on_host ? base::Device{base::DeviceType::kCpu, 0} : device_;
  tensor.device = {static_cast<DLDeviceType>(where.type), where.id};
  tensor.ndim = static_cast<int>(spec.shape.size());
  tensor.dtype = spec.dtype;
  tensor.shape = spec.shape.empty() ? nullptr : spec.shape.data();
  // Room for the data at any offset within a page past the boundary the offset counts from.
  const bool huge = huge_pages_ && on_host;
  const uint64_t boundary = std::max({alignment_, kPageBytes, huge ? kHugePageBytes : 0});
  const size_t span = Span(spec, boundary, huge);
  if (span == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", spec.num_bytes, " bytes for '", spec.text, "'"));
  }
  const size_t advised = huge ? span - boundary : 0;
  KPROF_ASSIGN_OR_RETURN(void* allocation, (on_host ? host_api_ : api_)->Alloc(where, span));
  auto* const raw = static_cast<unsigned char*>(allocation);
  const uintptr_t address = reinterpret_cast<uintptr_t>(raw);
  unsigned char* const start = raw + (boundary - address % boundary) % boundary;
  tensor.data = start + OffsetOf(placement, k);
  allocations_.push_back(raw);
  allocated_bytes_ += span;
  starts_.push_back(start);
  tensors_.push_back(tensor);
  if (huge) madvise(start, advised, MADV_HUGEPAGE);  // a host without THP ignores it
  return absl::OkStatus();
}

uint64_t Arguments::Span(const ArgSpec& spec, uint64_t boundary, bool huge) {
  if (spec.num_bytes > SIZE_MAX - 2 * boundary - kHugePageBytes) return 0;
  // With huge pages, whole 2 MiB pages from the boundary on, so that the tensor's pages can be
  // huge ones: the advised range is all inside the allocation.
  if (huge) {
    return (kPageBytes + spec.num_bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes +
           boundary;
  }
  return spec.num_bytes + boundary + kPageBytes;
}

std::vector<TensorPlace> Arguments::Placement() const {
  std::vector<TensorPlace> places;
  places.reserve(tensors_.size());
  for (const DLTensor& tensor : tensors_) places.push_back(PlaceOf(tensor.data, alignment_));
  return places;
}

absl::Status Arguments::MoveTo(size_t k, uint64_t offset) {
  DLTensor& tensor = tensors_[k];
  auto* const from = static_cast<unsigned char*>(tensor.data);
  unsigned char* const to = starts_[k] + offset;
  const size_t bytes = specs_[k].num_bytes;
  if (to == from) return absl::OkStatus();
  if (OnHost(tensor)) {
    std::memmove(to, from, bytes);
  } else if (to + bytes <= from || from + bytes <= to) {
    KPROF_RETURN_IF_ERROR(api_->Copy(device_, to, from, bytes, CopyKind::kDeviceToDevice));
  } else {
    // A device copy between overlapping ranges is undefined: through a buffer of its own.
    KPROF_ASSIGN_OR_RETURN(void* buffer, api_->Alloc(device_, bytes));
    absl::Status moved = api_->Copy(device_, buffer, from, bytes, CopyKind::kDeviceToDevice);
    if (moved.ok()) moved = api_->Copy(device_, to, buffer, bytes, CopyKind::kDeviceToDevice);
    api_->Free(device_, buffer);
    KPROF_RETURN_IF_ERROR(moved);
  }
  tensor.data = to;
  return absl::OkStatus();
}

Arguments::Arguments(std::vector<ArgSpec> specs, base::Device device, DeviceApi* api,
                     DeviceApi* host_api)
    : specs_(std::move(specs)), device_(device), api_(api), host_api_(host_api) {
  tensors_.reserve(specs_.size());
}

Arguments::~Arguments() {
  for (size_t k = 0; k < allocations_.size(); ++k) {
    if (OnHost(tensors_[k])) {
      host_api_->Free({base::DeviceType::kCpu, 0}, allocations_[k]);
    } else {
      api_->Free(device_, allocations_[k]);
    }
  }
}

std::string Arguments::ShapeString() const {
  std::vector<report::TensorShape> shapes;
  shapes.reserve(specs_.size());
  for (const ArgSpec& spec : specs_) shapes.push_back(ShapeOf(spec));
  return report::ShapeString(shapes);
}

absl::StatusOr<std::vector<std::string>> Arguments::Sha256() const {
  std::vector<std::string> digests;
  std::vector<unsigned char> host;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const void* data = tensors_[k].data;
    if (!OnHost(tensors_[k])) {
      host.resize(specs_[k].num_bytes);
      KPROF_RETURN_IF_ERROR(
          api_->Copy(device_, host.data(), data, host.size(), CopyKind::kDeviceToHost));
      data = host.data();
    }
    std::string hex =
        base::Sha256Hex(std::string_view(static_cast<const char*>(data), specs_[k].num_bytes));
    digests.push_back(std::move(hex));
  }
  return digests;
}

absl::Status Arguments::ReadBack(size_t index, void* out) const {
  const DLTensor& tensor = tensors_.at(index);
  const uint64_t bytes = specs_[index].num_bytes;
  if (OnHost(tensor)) {
    if (bytes > 0) std::memcpy(out, tensor.data, bytes);
    return absl::OkStatus();
  }
  return api_->Copy(device_, out, tensor.data, bytes, CopyKind::kDeviceToHost);
}

absl::Status Arguments::FlushFromCaches(size_t first) {
  for (size_t k = first; k < tensors_.size(); ++k) {
    if (OnHost(tensors_[k]) != (device_.type == base::DeviceType::kCpu)) continue;  // a scalar
    KPROF_RETURN_IF_ERROR(api_->FlushCache(device_, tensors_[k].data, specs_[k].num_bytes));
  }
  return absl::OkStatus();
}

}  // namespace kprof::core

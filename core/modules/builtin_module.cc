#include "core/modules/builtin_module.h"

#include <time.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/args/data_type.h"

namespace kprof::core {
namespace {

// Return codes of the builtin kernels when called without their argument check.
constexpr int32_t kBadArguments = 1;

bool IsScalar(const DLTensor& t, DLDataType type) {
  return t.ndim == 0 && t.dtype.code == type.code && t.dtype.bits == type.bits &&
         t.dtype.lanes == 1;
}
bool IsType(const DLTensor& t, uint8_t code, uint8_t bits) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1;
}
int64_t Elements(const DLTensor& t) { return kprof_num_elements(&t); }
size_t Bytes(const DLTensor& t) { return static_cast<size_t>(Elements(t)) * ElementBytes(t.dtype); }
double ScalarF64(const DLTensor& t) {
  double v;
  std::memcpy(&v, t.data, sizeof v);
  return v;
}

constexpr DLDataType kF64{kDLFloat, 64, 1};
constexpr DLDataType kF32{kDLFloat, 32, 1};

// --- the kernels (module ABI) ---------------------------------------------------------------

// Does nothing: what a call through the module ABI costs, for overhead and timer-floor figures.
int32_t Nop(DLTensor*, int32_t) { return 0; }

int32_t SpinUs(DLTensor* args, int32_t n) {
  if (n != 1 || !IsScalar(args[0], kF64)) return kBadArguments;
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double, std::micro>(ScalarF64(args[0]));
  while (std::chrono::steady_clock::now() < until) {
  }
  return 0;
}

int32_t SleepUs(DLTensor* args, int32_t n) {
  if (n != 1 || !IsScalar(args[0], kF64)) return kBadArguments;
  const double us = ScalarF64(args[0]);
  if (!(us > 0)) return 0;
  timespec ts{static_cast<time_t>(us / 1e6), static_cast<long>(std::fmod(us, 1e6) * 1e3)};
  while (nanosleep(&ts, &ts) != 0) {
  }
  return 0;
}

int32_t Copy(DLTensor* args, int32_t n) {
  if (n != 2 || Bytes(args[0]) != Bytes(args[1])) return kBadArguments;
  std::memcpy(args[0].data, args[1].data, Bytes(args[0]));
  return 0;
}

template <typename T>
void FillAs(DLTensor& t, double value) {
  const T v = static_cast<T>(value);
  auto* p = static_cast<T*>(t.data);
  for (int64_t i = 0, e = Elements(t); i < e; ++i) p[i] = v;
}

int32_t Fill(DLTensor* args, int32_t n) {
  if (n != 2 || !IsScalar(args[1], kF64)) return kBadArguments;
  const double value = ScalarF64(args[1]);
  DLTensor& dst = args[0];
  if (IsType(dst, kDLFloat, 32)) {
    FillAs<float>(dst, value);
  } else if (IsType(dst, kDLFloat, 64)) {
    FillAs<double>(dst, value);
  } else if (IsType(dst, kDLInt, 32)) {
    FillAs<int32_t>(dst, value);
  } else if (IsType(dst, kDLInt, 64)) {
    FillAs<int64_t>(dst, value);
  } else {
    return kBadArguments;
  }
  return 0;
}

int32_t Saxpy(DLTensor* args, int32_t n) {
  if (n != 3 || !IsType(args[0], kDLFloat, 32) || !IsType(args[1], kDLFloat, 32) ||
      Elements(args[0]) != Elements(args[1]) || !IsScalar(args[2], kF32)) {
    return kBadArguments;
  }
  float a;
  std::memcpy(&a, args[2].data, sizeof a);
  float* __restrict y = static_cast<float*>(args[0].data);
  const float* __restrict x = static_cast<const float*>(args[1].data);
  for (int64_t i = 0, e = Elements(args[0]); i < e; ++i) y[i] = a * x[i] + y[i];
  return 0;
}

bool MatmulShapes(const DLTensor* args, int32_t n) {
  if (n != 3) return false;
  for (int i = 0; i < 3; ++i) {
    if (!IsType(args[i], kDLFloat, 32) || args[i].ndim != 2) return false;
  }
  const int64_t* c = args[0].shape;
  const int64_t* a = args[1].shape;
  const int64_t* b = args[2].shape;
  return c[0] == a[0] && a[1] == b[0] && c[1] == b[1];
}

int32_t Matmul(DLTensor* args, int32_t n) {
  if (!MatmulShapes(args, n)) return kBadArguments;
  const int64_t m = args[1].shape[0], k = args[1].shape[1], cols = args[2].shape[1];
  // Distinct allocations: telling the compiler so lets it vectorise the inner loop.
  float* __restrict c = static_cast<float*>(args[0].data);
  const float* __restrict a = static_cast<const float*>(args[1].data);
  const float* __restrict b = static_cast<const float*>(args[2].data);
  for (int64_t i = 0; i < m * cols; ++i) c[i] = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const float aip = a[i * k + p];
      for (int64_t j = 0; j < cols; ++j) c[i * cols + j] += aip * b[p * cols + j];
    }
  }
  return 0;
}

// --- argument checks with messages ----------------------------------------------------------

absl::Status Wants(std::string_view function, std::string_view signature) {
  return absl::InvalidArgumentError(
      absl::StrCat("builtin '", std::string(function), "' takes ", std::string(signature)));
}

bool OnCpu(const DLTensor* args, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    if (args[i].device.device_type != kDLCPU) return false;
  }
  return true;
}

struct Builtin {
  KprofFunction function;
  std::string_view signature;  // for messages: "(float64 us)"
  bool (*valid)(const DLTensor* args, int32_t n);
};

const std::map<std::string, Builtin, std::less<>>& BuiltinTable() {
  static const auto* const builtins = new std::map<std::string, Builtin, std::less<>>{
      {"nop", {Nop, "no arguments", [](const DLTensor*, int32_t n) { return n == 0; }}},
      {"spin_us",
       {SpinUs, "one float64 scalar, the microseconds to spin (e.g. float64:100)",
        [](const DLTensor* a, int32_t n) { return n == 1 && IsScalar(a[0], kF64); }}},
      {"sleep_us",
       {SleepUs, "one float64 scalar, the microseconds to sleep (e.g. float64:100)",
        [](const DLTensor* a, int32_t n) { return n == 1 && IsScalar(a[0], kF64); }}},
      {"copy",
       {Copy, "dst and src tensors of the same size in bytes",
        [](const DLTensor* a, int32_t n) { return n == 2 && Bytes(a[0]) == Bytes(a[1]); }}},
      {"fill",
       {Fill, "dst (float32, float64, int32 or int64) and a float64 value",
        [](const DLTensor* a, int32_t n) {
          return n == 2 && IsScalar(a[1], kF64) &&
                 (IsType(a[0], kDLFloat, 32) || IsType(a[0], kDLFloat, 64) ||
                  IsType(a[0], kDLInt, 32) || IsType(a[0], kDLInt, 64));
        }}},
      {"saxpy",
       {Saxpy, "float32 y[n], float32 x[n] and a float32 scalar a (y = a * x + y)",
        [](const DLTensor* a, int32_t n) {
          return n == 3 && IsType(a[0], kDLFloat, 32) && IsType(a[1], kDLFloat, 32) &&
                 Elements(a[0]) == Elements(a[1]) && IsScalar(a[2], kF32);
        }}},
      {"matmul", {Matmul, "float32 C[m, n], A[m, k], B[k, n] (C = A × B)", MatmulShapes}},
  };
  return *builtins;
}

class BuiltinKernels final : public Module {
 public:
  BuiltinKernels() {
    for (const auto& entry : BuiltinTable()) names_.push_back(entry.first);
  }
  const std::vector<std::string>& functions() const override { return names_; }

  absl::StatusOr<ModuleFunction> GetFunction(std::string_view name) const override {
    const auto it = BuiltinTable().find(name);
    if (it == BuiltinTable().end()) return NoSuchFunction(name, names_);
    ModuleFunction function;
    function.name = it->first;
    function.function = it->second.function;
    function.check_arguments = [name = it->first, builtin = it->second](const DLTensor* args,
                                                                        int32_t n) {
      if (!OnCpu(args, n)) return Wants(name, "tensors in host memory (device cpu:0)");
      if (!builtin.valid(args, n)) return Wants(name, builtin.signature);
      return absl::OkStatus();
    };
    return function;
  }

 private:
  std::vector<std::string> names_;
};

}  // namespace

const Module& BuiltinModule() {
  static const BuiltinKernels* const module = new BuiltinKernels();
  return *module;
}

}  // namespace kprof::core

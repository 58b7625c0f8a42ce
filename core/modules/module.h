// Module: a set of functions with the kprof module ABI, from wherever they came — a shared
// library loaded in a worker, or the kernels compiled into kprofd (module "builtin").
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cuda/launch_config.h"
#include "kprof/module_abi.h"

namespace kprof::core {

struct ModuleFunction {
  std::string name;
  KprofFunction function = nullptr;
  // Checks the arguments before any call, with a message a person can act on ("matmul wants
  // float32 tensors C[m, n], A[m, k], B[k, n]"). Uploaded modules have none: their checks are
  // their return codes.
  std::function<absl::Status(const DLTensor* args, int32_t num_args)> check_arguments;
  // A CUDA kernel instead of `function`: checks the launch configuration against the device's
  // and the kernel's limits, packs the arguments, and returns the launch each call repeats
  // (queued on the device's stream; it does not wait for the kernel).
  std::function<absl::StatusOr<std::function<absl::Status()>>(const LaunchConfig& launch,
                                                              DLTensor* args, int32_t num_args)>
      bind_kernel;
};

class Module {
 public:
  virtual ~Module() = default;

  // The functions the module exports, sorted.
  virtual const std::vector<std::string>& functions() const = 0;

  // The function named `name`; NOT_FOUND listing the first few exports when there is none.
  virtual absl::StatusOr<ModuleFunction> GetFunction(std::string_view name) const = 0;
};

// The NOT_FOUND error for a function a module does not export:
// "module holds no function 'gem' (it exports: gemm, gemv)".
absl::Status NoSuchFunction(std::string_view name, const std::vector<std::string>& exports);

}  // namespace kprof::core

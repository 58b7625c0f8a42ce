// CudaModule: a cubin, fatbin or PTX module loaded into a CUDA device's context with
// cuModuleLoadDataEx. Its functions are kernels: GetFunction gives a ModuleFunction whose
// bind_kernel checks a launch configuration against the device's and the kernel's limits,
// packs the arguments (tensors as device pointers, scalars by value) and returns the launch,
// queued on the context's stream. Built with KPROF_WITH_CUDA.
//
//   KPROF_ASSIGN_OR_RETURN(auto module, CudaModule::LoadFile(path, "ptx", 0));
//   KPROF_ASSIGN_OR_RETURN(ModuleFunction vadd, module->GetFunction("vadd"));
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/modules/module.h"

namespace kprof::core {

class CudaContext;

class CudaModule final : public Module {
 public:
  // Loads `bytes` of `format` ("cubin", "fatbin" or "ptx") on cuda:`ordinal`. INVALID_ARGUMENT
  // carrying the driver's JIT log when the driver rejects the code (PTX that does not compile,
  // no code for this GPU's architecture).
  static absl::StatusOr<std::unique_ptr<CudaModule>> Load(std::string bytes,
                                                          std::string_view format, int ordinal);
  static absl::StatusOr<std::unique_ptr<CudaModule>> LoadFile(const std::string& path,
                                                              std::string_view format, int ordinal);
  ~CudaModule() override;

  // The kernels the bytes declare (cubin symbol table, PTX .entry directives); empty for a
  // fatbin, whose kernels only the driver can list.
  const std::vector<std::string>& functions() const override { return functions_; }
  absl::StatusOr<ModuleFunction> GetFunction(std::string_view name) const override;

 private:
  CudaModule(CudaContext* context, CUmodule module, std::vector<std::string> functions)
      : context_(context), module_(module), functions_(std::move(functions)) {}

  CudaContext* context_;
  CUmodule module_;
  std::vector<std::string> functions_;
};

}  // namespace kprof::core

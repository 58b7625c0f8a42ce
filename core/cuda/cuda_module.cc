#include "core/cuda/cuda_module.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "core/cuda/cuda_context.h"
#include "core/cuda/cuda_image.h"
#include "core/cuda/kernel_params.h"
#include "core/cuda/launch_config.h"
#include "core/modules/elf_inspector.h"

namespace kprof::core {
namespace {

constexpr size_t kJitLogBytes = 16 << 10;

// What a load failure means to the person who sent the module.
std::string LoadHint(CUresult result) {
  switch (result) {
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return " (the module has no code for this GPU's architecture: build it for this GPU, or "
             "include PTX for the driver to compile)";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return " (the PTX is newer than this driver compiles: generate it with an older ISA "
             "version, or update the driver)";
    default:
      return "";
  }
}

// Every tensor a kernel gets must be on its device; scalars, passed by value, are on the host.
absl::Status CheckPlacement(const DLTensor* args, int32_t num_args, int ordinal) {
  for (int32_t i = 0; i < num_args; ++i) {
    const DLTensor& t = args[i];
    if (t.ndim == 0) continue;
    if (t.device.device_type != kDLCUDA || t.device.device_id != ordinal) {
      return absl::InvalidArgumentError(absl::StrCat("argument ", i,
                                                     " is not in the memory of cuda:", ordinal,
                                                     " (a kernel takes tensors "
                                                     "there and scalars by value)"));
    }
  }
  return absl::OkStatus();
}

// The packed arguments against the kernel's parameter sizes: as many, each of its size (8 bytes
// for a tensor's device pointer, the dtype's for a scalar).
absl::Status CheckParameters(const std::string& kernel, const std::vector<size_t>& sizes,
                             const KernelParams& packed) {
  if (packed.size() != sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("kernel '", kernel, "' takes ", sizes.size(),
                                                   " parameters; the job gives ", packed.size(),
                                                   " arguments"));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (packed.value_size(i) != sizes[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("argument ", i, " is ", packed.value_size(i),
                       " bytes as a kernel parameter, but "
                       "parameter ",
                       i, " of kernel '", kernel, "' is ", sizes[i],
                       " bytes (a tensor passes "
                       "an 8-byte pointer; a scalar its dtype, e.g. int32 for an int)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaModule>> CudaModule::LoadFile(const std::string& path,
                                                                 std::string_view format,
                                                                 int ordinal) {
  KPROF_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(path, "module"));
  return Load(std::move(bytes), format, ordinal);
}

absl::StatusOr<std::unique_ptr<CudaModule>> CudaModule::Load(std::string bytes,
                                                             std::string_view format, int ordinal) {
  std::vector<std::string> functions;
  if (format == "cubin") {
    KPROF_ASSIGN_OR_RETURN(functions, CubinKernels(bytes));
  } else if (format == "ptx") {
    functions = PtxKernels(bytes);
    bytes.push_back('\0');  // the driver reads PTX as a C string
  } else if (format != "fatbin") {
    return absl::InvalidArgumentError(absl::StrCat("'", std::string(format),
                                                   "' is not a CUDA module format (accepted: "
                                                   "cubin, fatbin, ptx)"));
  }
  KPROF_ASSIGN_OR_RETURN(CudaContext * context, CudaContext::For(ordinal));
  CudaDriver* cu = context->driver();

  std::string error_log(kJitLogBytes, '\0');
  std::string info_log(kJitLogBytes, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(error_log.size()), info_log.data(),
                    reinterpret_cast<void*>(info_log.size())};
  CUmodule module = nullptr;
  const CUresult result = cu->ModuleLoadDataEx(&module, bytes.data(), 4, options, values);
  if (result != CUDA_SUCCESS) {
    const absl::Status status = cu->Check(result, "cuModuleLoadDataEx");
    // Out of memory, or a context already lost, is not the module's fault.
    if (absl::IsResourceExhausted(status) || absl::IsAborted(status)) return status;
    error_log.resize(error_log.find('\0') == std::string::npos ? error_log.size()
                                                               : error_log.find('\0'));
    std::string message =
        absl::StrCat("cannot load the ", std::string(format), " module on cuda:", ordinal, ": ",
                     status.message(), LoadHint(result));
    if (!error_log.empty()) {
      absl::StrAppend(&message, "; JIT log:\n", absl::StripTrailingAsciiWhitespace(error_log));
    }
    return absl::InvalidArgumentError(message);
  }
  return std::unique_ptr<CudaModule>(new CudaModule(context, module, std::move(functions)));
}

CudaModule::~CudaModule() {
  if (module_ != nullptr) (void)context_->driver()->ModuleUnload(module_);
}

absl::StatusOr<ModuleFunction> CudaModule::GetFunction(std::string_view name) const {
  CudaDriver* cu = context_->driver();
  const std::string kernel_name(name);
  CUfunction kernel = nullptr;
  if (const CUresult r = cu->ModuleGetFunction(&kernel, module_, kernel_name.c_str());
      r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NOT_FOUND) {
      if (functions_.empty()) {
        return absl::NotFoundError(absl::StrCat("module holds no kernel '", kernel_name, "'"));
      }
      return NoSuchFunction(name, functions_);
    }
    return cu->Check(r, "cuModuleGetFunction");
  }
  // The kernel's own limits narrow the device's: registers cap its threads per block, and its
  // static shared memory comes out of what a block may have.
  LaunchLimits limits = context_->limits();
  int max_threads = 0, static_shared = 0;
  KPROF_CU(cu, FuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kernel));
  KPROF_CU(cu, FuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, kernel));
  limits.max_threads_per_block = std::min<int64_t>(limits.max_threads_per_block, max_threads);
  limits.max_shared_bytes = std::max<int64_t>(0, limits.max_shared_bytes - static_shared);
  // Dynamic shared memory beyond the default 48 KiB is opted into per kernel, once, for all of
  // its launches; where the opt-in fails, launches keep to the default.
  if (cu->FuncSetAttribute(kernel, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           static_cast<int>(limits.max_shared_bytes)) != CUDA_SUCCESS) {
    limits.max_shared_bytes =
        std::min<int64_t>(limits.max_shared_bytes, std::max(0, (48 << 10) - static_shared));
  }
  // The kernel's parameter sizes, where the driver tells (CUDA 12.4 and later): a launch with
  // too few arguments would have the driver read past them.
  std::optional<std::vector<size_t>> parameters;
  if (cu->FuncGetParamInfo != nullptr) {
    parameters.emplace();
    size_t offset = 0, size = 0;
    while (parameters->size() < 4096 &&
           cu->FuncGetParamInfo(kernel, parameters->size(), &offset, &size) == CUDA_SUCCESS) {
      parameters->push_back(size);
    }
  }

  ModuleFunction function;
  function.name = kernel_name;
  CudaContext* context = context_;
  function.bind_kernel = [context, kernel, limits, parameters, kernel_name](
                             const LaunchConfig& launch, DLTensor* args,
                             int32_t num_args) -> absl::StatusOr<std::function<absl::Status()>> {
    KPROF_RETURN_IF_ERROR(ValidateLaunch(launch, limits));
    KPROF_RETURN_IF_ERROR(CheckPlacement(args, num_args, context->ordinal()));
    KPROF_ASSIGN_OR_RETURN(KernelParams packed, KernelParams::Pack(args, num_args));
    if (parameters.has_value()) {
      KPROF_RETURN_IF_ERROR(CheckParameters(kernel_name, *parameters, packed));
    }
    CudaDriver* driver = context->driver();
    auto params = std::make_shared<KernelParams>(std::move(packed));
    const auto u = [](int64_t v) { return static_cast<unsigned>(v); };
    return [driver, kernel, launch, params, stream = context->stream(), u]() -> absl::Status {
      const CUresult r =
          driver->LaunchKernel(kernel, u(launch.grid[0]), u(launch.grid[1]), u(launch.grid[2]),
                               u(launch.block[0]), u(launch.block[1]), u(launch.block[2]),
                               u(launch.shared_bytes), stream, params->pointers(), nullptr);
      if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) {
        // What the request asked of this kernel, not a fault of the daemon.
        return absl::InvalidArgumentError(absl::StrCat(
            driver->Check(r, "cuLaunchKernel").message(),
            r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
                ? " (too many registers or too much shared memory for this block size)"
                : " (the launch configuration or the arguments do not suit this kernel)"));
      }
      return driver->Check(r, "cuLaunchKernel");
    };
  };
  return function;
}

}  // namespace kprof::core

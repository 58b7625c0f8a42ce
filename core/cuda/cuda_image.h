// What kind of CUDA code a module's bytes are: a cubin (an ELF for the GPU), a fatbin (cubins
// and PTX for several architectures in one container), or PTX (the virtual ISA as text, which
// the driver compiles at load). Decided from the bytes alone, so the daemon can classify an
// upload without a GPU.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kprof::core {

enum class CudaImageKind { kCubin, kFatbin, kPtx };

// "cubin", "fatbin", "ptx".
std::string_view CudaImageKindName(CudaImageKind kind);

// The kind of `bytes`, or nullopt when they are none of the three:
//   cubin   an ELF whose machine is EM_CUDA (190)
//   fatbin  the fatbin container's magic 0xBA55ED50 (little-endian) at the start
//   ptx     text holding a ".version" and a ".target" directive
std::optional<CudaImageKind> SniffCudaImage(std::string_view bytes);

// The kernels a PTX module declares (".entry NAME(" directives), sorted, without duplicates.
std::vector<std::string> PtxKernels(std::string_view ptx);

}  // namespace kprof::core

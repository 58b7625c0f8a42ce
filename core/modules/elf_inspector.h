// Reads what the daemon needs to know about a shared-library module from its bytes alone —
// never by loading it, which would run the module's constructors (client code) in the daemon.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kprof::core {

struct SharedLibraryInfo {
  std::string machine;                 // "x86-64", "aarch64", ...
  std::vector<std::string> functions;  // exported functions, sorted, without duplicates
  std::string soname;                  // DT_SONAME, or empty
  std::vector<std::string> needed;     // DT_NEEDED, in order
};

// Checks that `bytes` are an ELF shared object of this host's architecture, class and byte
// order, and lists the functions its dynamic symbol table exports (defined, global or weak,
// default or protected visibility). INVALID_ARGUMENT says what the bytes are instead: not ELF,
// truncated, an executable, an ELF for another machine ("ELF for aarch64, this host is
// x86-64"), malformed tables, or a library that exports no function; and a library defining
// symbols of GNU-unique binding (g++'s default for static locals of inline functions and
// static members of templates), which the dynamic loader shares between every module that
// defines them, RTLD_LOCAL or not — two candidates would share that state. Every offset is
// checked against the buffer: malformed input is an error, never an out-of-bounds read.
absl::StatusOr<SharedLibraryInfo> InspectSharedLibrary(std::string_view bytes);

// The kernels (__global__ functions: global functions marked as CUDA entries) of a cubin, an
// ELF for the GPU (EM_CUDA), sorted. INVALID_ARGUMENT for anything else, for malformed tables,
// and for a cubin without kernels. Bounds-checked like InspectSharedLibrary.
absl::StatusOr<std::vector<std::string>> CubinKernels(std::string_view bytes);

// This host's ELF machine name, as InspectSharedLibrary reports machines.
std::string_view HostElfMachine();

}  // namespace kprof::core

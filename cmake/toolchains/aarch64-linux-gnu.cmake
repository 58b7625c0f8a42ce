# Cross-compiling kprofd for arm64 (Jetson-class boards, arm64 servers) on a Debian x86-64 host:
# Debian's crossbuild-essential-arm64 and the arm64 multiarch -dev packages (gRPC, protobuf,
# Abseil, GoogleTest and PAPI are Multi-Arch: same), with protoc and grpc_cpp_plugin taken from
# the build host. Tests run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR), with the kernel's
# binfmt_misc running the arm64 programs they start. `make test-arm64` sets all of this up.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Libraries and headers from the arm64 side of the multiarch tree; programs from the host's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

# The code generators run here: the host's protoc and gRPC plugin.
set(Protobuf_PROTOC_EXECUTABLE /usr/bin/protoc CACHE FILEPATH "protoc of the build host")

# The arm64 libraries are in the multiarch tree (/lib/aarch64-linux-gnu), where qemu finds them.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)

# DLPack is a header, but Debian's libdlpack-dev is not Multi-Arch: the host's package serves.
set(dlpack_DIR /usr/lib/x86_64-linux-gnu/cmake/dlpack CACHE PATH "DLPack's CMake package")

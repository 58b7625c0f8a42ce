#!/usr/bin/env bash
# Cross-builds kprofd for arm64 on a Debian 12 x86-64 host and runs its unit and integration
# tests under qemu-user. Not part of `make test`: it changes the machine's package setup (the
# arm64 architecture in dpkg, arm64 -dev packages, qemu's binfmt handler), so it does that only
# when asked: `make test-arm64 ARM64_SETUP=yes` (or --setup here).
# Usage: deploy/test-arm64.sh [--setup] [BUILD_DIR]
set -euo pipefail
setup=no
if [ "${1:-}" = "--setup" ]; then setup=yes; shift; fi
build=${1:-build/arm64}
source_dir=$(cd "$(dirname "$0")/.." && pwd)

"$source_dir/deploy/setup-arm64.sh" $([ "$setup" = yes ] && echo --setup) test-arm64

# The tests of what qemu-user cannot do (perf_event_open, RLIMIT_DATA) skip, saying so.
export KPROF_TEST_EMULATOR=qemu-user
cmake -S "$source_dir" -B "$build" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$source_dir/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKPROF_WITH_CUDA=OFF -DBUILD_TESTING=ON
cmake --build "$build"
file "$build/server/kprofd"
ctest --test-dir "$build" --output-on-failure -L "unit|integration" --timeout 600

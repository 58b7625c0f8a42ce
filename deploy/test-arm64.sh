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

arm64_packages=(crossbuild-essential-arm64 qemu-user-static
  libgrpc++-dev:arm64 libprotobuf-dev:arm64 libabsl-dev:arm64 libgtest-dev:arm64
  libgmock-dev:arm64 libssl-dev:arm64 libpapi-dev:arm64 libseccomp-dev:arm64 libsystemd-dev:arm64
  libbenchmark-dev:arm64 prometheus-cpp-dev:arm64)
missing=()
for p in "${arm64_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$setup" != yes ]; then
    echo "test-arm64: missing ${missing[*]}" >&2
    echo "test-arm64: 'make test-arm64 ARM64_SETUP=yes' adds the arm64 architecture to dpkg and installs them" >&2
    exit 2
  fi
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The kernel runs arm64 programs through qemu (tests start kprofd, kprofd starts its workers).
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/register" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo mount -t binfmt_misc binfmt_misc "$binfmt"
fi
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  # Debian's own registration (qemu-user-static), which systemd-binfmt would load at boot.
  grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf | $sudo tee "$binfmt/register" >/dev/null
fi
# arm64 programs find their libraries in the multiarch tree (/lib/aarch64-linux-gnu), which the
# arm64 packages installed: no sysroot prefix for qemu.

# The tests of what qemu-user cannot do (perf_event_open, RLIMIT_DATA) skip, saying so.
export KPROF_TEST_EMULATOR=qemu-user
cmake -S "$source_dir" -B "$build" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$source_dir/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKPROF_WITH_CUDA=OFF -DBUILD_TESTING=ON
cmake --build "$build"
file "$build/server/kprofd"
ctest --test-dir "$build" --output-on-failure -L "unit|integration" --timeout 600

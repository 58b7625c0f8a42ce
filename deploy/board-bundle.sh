#!/usr/bin/env bash
# The arm64 board bundle (`make board-bundle`): kprofd, kprofd-worker and kprof cross-built for
# arm64 from Debian 12's arm64 packages, with every library they load except the C and C++
# runtimes (the board's own: see below), under one prefix that runs from wherever it is
# unpacked; an installer (install.sh: /opt/kprofd, the systemd unit); the same files as a .deb.
# Then the checks: no GLIBC symbol newer than the board's, the size, and the bundle's tests
# under qemu-user in a root that has the board's runtimes and nothing of this project's but
# the unpacked bundle (deploy/board/test-bundle.sh).
#
# Why the C++ runtime is the board's: Debian 12's libstdc++ needs arc4random@GLIBC_2.36, which
# JetPack 6's glibc (2.35) lacks, while every board kprofd targets has a libstdc++ from GCC 12
# or later (Ubuntu 22.04: 12.3, 24.04: 14), which is all the bundle asks (GLIBCXX_3.4.30, checked).
#
# Writes build/board-bundle/: kprofd-VERSION-arm64.tar.gz (and its unpacked tree),
# kprofd_VERSION_arm64.deb, tests/ (the test programs, not part of the bundle).
# Usage: board-bundle.sh [--setup] [BUILD_DIR] [OUT_DIR]
set -euo pipefail
setup=no
if [ "${1:-}" = "--setup" ]; then setup=yes; shift; fi
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-build/board}")
out=$(realpath -m "${2:-build/board-bundle}")
max_glibc=2.35    # Ubuntu 22.04 (JetPack 6); 24.04 (JetPack 7) has 2.39
max_glibcxx=3.4.30  # GCC 12's libstdc++, Ubuntu 22.04's
max_cxxabi=1.3.13
max_mib=40

"$source_dir/deploy/setup-arm64.sh" $([ "$setup" = yes ] && echo --setup) board-bundle

# CUDA from the host's headers (the driver API is the same on arm64); the driver is the
# board's, loaded at run time.
cuda_headers=/usr/local/cuda/include
if [ ! -e "$cuda_headers/cuda.h" ] && [ -e /usr/include/cuda.h ]; then
  cuda_headers=/usr/include  # Debian's nvidia-cuda-dev
fi
cmake -S "$source_dir" -B "$build" -G Ninja -DKPROF_CUDA_HEADERS="$cuda_headers" \
  -DCMAKE_TOOLCHAIN_FILE="$source_dir/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKPROF_BOARD_BUNDLE=ON -DCMAKE_INSTALL_PREFIX=/opt/kprofd \
  -DKPROF_WITH_CUDA=ON -DBUILD_TESTING=ON
if grep -q 'CUDA: no' "$build/generated/kprof/config.h"; then
  echo "board-bundle: no CUDA headers (cuda.h in /usr/local/cuda/include or /usr/include): the" \
       "bundle would not serve the board's GPU; install the CUDA toolkit (or nvidia-cuda-dev)" >&2
  exit 1
fi
# The stand-in CUDA driver too, where nvcc built the test kernels it runs.
fake_cuda=""
if ninja -C "$build" -t query kprof_fake_cuda >/dev/null 2>&1; then fake_cuda=kprof_fake_cuda; fi
cmake --build "$build" --target kprofd kprofd-worker kprof core_test service_test \
  kprof_test_modules $fake_cuda

# The libraries: what the programs need (DT_NEEDED, transitively), found in the arm64
# multiarch tree as the board's loader would find them in the bundle; the C library's own and
# the C++ runtime stay the board's.
libdirs=(/lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
boards_own='^(libc|libm|libpthread|libdl|librt|libresolv|libanl|libutil|libnsl|libmvec|ld-linux-aarch64|libstdc\+\+|libgcc_s)\.so'
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
rm -rf "$build/bundle-lib"
mkdir -p "$build/bundle-lib"
queue=("$build/server/kprofd" "$build/server/kprofd-worker" "$build/client/kprof")
declare -A seen=()
while [ ${#queue[@]} -gt 0 ]; do
  file=${queue[0]}
  queue=("${queue[@]:1}")
  for lib in $(needed "$file"); do
    [[ $lib =~ $boards_own ]] && continue
    [ -n "${seen[$lib]:-}" ] && continue
    seen[$lib]=1
    found=""
    for d in "${libdirs[@]}"; do
      if [ -e "$d/$lib" ]; then found=$(realpath "$d/$lib"); break; fi
    done
    if [ -z "$found" ]; then
      echo "board-bundle: $lib (needed by $(basename "$file")) is not in ${libdirs[*]}" >&2
      exit 1
    fi
    aarch64-linux-gnu-strip --strip-unneeded -o "$build/bundle-lib/$lib" "$found"
    queue+=("$found")
  done
done

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
name=kprofd-$version-arm64
rm -rf "$out"
mkdir -p "$out"
cmake --install "$build" --component runtime --prefix "$out/$name" --strip
tar -C "$out" --owner=0 --group=0 -czf "$out/$name.tar.gz" "$name"
(cd "$build" && cpack -G DEB -B "$out/deb" >/dev/null)
mv "$out"/deb/kprofd_*_arm64.deb "$out/"
rm -rf "$out/deb"

# What the test run needs beside the bundle: the test programs and modules.
mkdir -p "$out/tests/modules"
for t in core_test service_test; do
  aarch64-linux-gnu-strip --strip-debug -o "$out/tests/$t" "$build/tests/$t"
done
cp "$build"/tests/modules/*.so "$out/tests/modules/"
cp "$build"/tests/modules/vector_add_cuda.* "$out/tests/modules/" 2>/dev/null || true
if [ -f "$build/tests/fake-cuda/libcuda.so.1" ]; then  # the stand-in driver, for the test
  mkdir -p "$out/tests/fake-cuda"
  cp "$build/tests/fake-cuda/libcuda.so.1" "$out/tests/fake-cuda/"
fi

"$source_dir/deploy/check-glibc.sh" --glibcxx "$max_glibcxx" --cxxabi "$max_cxxabi" "$max_glibc" "$out/$name"
mib() { echo $(( ($(stat -c %s "$1") + 1048575) / 1048576 )); }
unpacked=$(du -sm "$out/$name" | cut -f1)
echo "board-bundle: $out/$name.tar.gz $(mib "$out/$name.tar.gz") MiB ($unpacked MiB unpacked)," \
     "$(basename "$out"/kprofd_*_arm64.deb) $(mib "$out"/kprofd_*_arm64.deb) MiB"
if [ "$unpacked" -gt "$max_mib" ]; then
  echo "board-bundle: the unpacked bundle is $unpacked MiB, over the $max_mib MiB goal" >&2
  exit 1
fi
# The board's shell for the installer's test: Debian's static BusyBox for arm64, fetched (not
# installed) once.
busybox=$(find "$build" -maxdepth 1 -name 'busybox-static_*_arm64.deb' | head -1)
if [ -z "$busybox" ]; then
  (cd "$build" && apt-get download -q busybox-static:arm64 2>&1) ||
    { echo "board-bundle: cannot fetch busybox-static:arm64 for the bundle's test (apt-get download)" >&2; exit 1; }
  busybox=$(find "$build" -maxdepth 1 -name 'busybox-static_*_arm64.deb' | head -1)
fi
sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo  # the test chroots, in namespaces of its own
$sudo "$source_dir/deploy/board/test-bundle.sh" "$out/$name.tar.gz" "$out/kprofd_${version}_arm64.deb" \
  "$out/tests" "$busybox"

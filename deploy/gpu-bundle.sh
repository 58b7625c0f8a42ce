#!/usr/bin/env bash
# Packs a built tree for a machine that has a GPU but none of this project's Debian packages:
# kprofd, its worker and the CLI, the test programs and test modules, and every shared library
# they need except the C library's own (which the target has), debug info stripped.
# Usage: gpu-bundle.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/modules"
binaries=("$build/server/kprofd" "$build/server/kprofd-worker" "$build/client/kprof"
          "$build/tests/core_test" "$build/tests/service_test" "$build/tests/gpu_test")
for b in "${binaries[@]}"; do
  strip --strip-debug -o "$out/bin/$(basename "$b")" "$b"
done
cp "$build"/tests/modules/*.so "$out/modules/"
cp "$build"/tests/modules/vector_add_cuda.* "$out/modules/" 2>/dev/null || true
# The libraries, resolved as the loader would here; glibc's own stay the target's.
ldd "${binaries[@]}" | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do strip --strip-debug -o "$out/lib/$(basename "$lib")" "$lib"; done
cp "$(dirname "$0")/../tests/gpu/run.sh" "$out/run.sh"
size=$(du -sm "$out" | cut -f1)
echo "gpu bundle: $out, ${size} MiB"

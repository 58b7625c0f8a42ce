#!/usr/bin/env bash
# make gpu-bundle: the bundle fits what a lent GPU machine accepts (64 MiB), needs no library
# from this machine but the C library's, and its run.sh works here — kprofd starts from the
# bundle and says why there is no GPU; the CUDA tests pass or skip.
# Usage: gpu_bundle_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

"$source/deploy/gpu-bundle.sh" "$build" "$scratch/bundle" >"$scratch/made"
size=$(du -sm "$scratch/bundle" | cut -f1)
[ "$size" -lt 64 ] || fail "bundle of $size MiB (limit 64)"

for binary in "$scratch"/bundle/bin/*; do
  resolved=$(LD_LIBRARY_PATH="$scratch/bundle/lib" ldd "$binary")
  outside=$(awk '/=> \// {print $3}' <<<"$resolved" | grep -v "^$scratch/bundle/lib/" |
            grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true)
  [ -z "$outside" ] || fail "$(basename "$binary") needs libraries from outside the bundle: $outside"
  ! grep -q "not found" <<<"$resolved" || fail "$(basename "$binary"): $(grep 'not found' <<<"$resolved")"
done

output=$("$scratch/bundle/run.sh" 2>&1) || fail "run.sh failed: $output"
grep -q "== kprofd on this host" <<<"$output" || fail "run.sh printed no kprofd section"
grep -q "^cuda: " <<<"$output" || fail "kprof info from the bundle printed no cuda line: $output"
echo "gpu bundle: ${size} MiB, self-contained, run.sh passes here"

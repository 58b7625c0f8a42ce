#!/usr/bin/env bash
# The GPU checks, on a lent GPU machine, from a bundle made here by `make gpu-bundle` (that
# machine has CUDA's driver but none of this project's packages and no network).
# Usage: run.sh [BUNDLE_DIR]   (default: the directory of this script)
# Prints what kprofd finds on the GPU host and runs the CUDA tests; each section says what it
# found, and the script ends non-zero when a test fails.
set -uo pipefail
bundle=$(cd "${1:-$(dirname "$0")}" && pwd)
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KPROF_TEST_KPROFD="$bundle/bin/kprofd" KPROF_TEST_KPROF="$bundle/bin/kprof"
export KPROF_TEST_MODULE_DIR="$bundle/modules"
status=0
section() { printf '\n== %s\n' "$*"; }

section "host"
uname -a
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv

section "kprofd on this host"
scratch=$(mktemp -d)
"$bundle/bin/kprofd" --listen 127.0.0.1:0 --port-file "$scratch/port" --cache-dir "$scratch/cache" \
  2>"$scratch/kprofd.log" &
daemon=$!
for _ in $(seq 100); do [ -s "$scratch/port" ] && break; sleep 0.1; done
if [ -s "$scratch/port" ]; then
  kprof() { "$bundle/bin/kprof" --target "127.0.0.1:$(cat "$scratch/port")" "$@"; }
  info=$(kprof info) || status=1
  echo "$info"

  section "vector add over 2^26 floats through kprofd (c = a + b: 12 bytes moved per element)"
  if ! echo "$info" | grep -q '^cuda:0'; then
    echo "skipped: kprofd lists no CUDA device here"
  else
  n=$((1 << 26))
  cc=$(echo "$info" | grep -o -m1 'sm_[0-9]*' | head -1)
  module="$bundle/modules/vector_add_cuda.${cc%?}0.cubin"
  [ -f "$module" ] || module="$bundle/modules/vector_add_cuda.ptx"
  peak=$(echo "$info" | grep -o -m1 'peak [0-9.]* GB/s' | awk '{print $2}')
  printf '%-28s %12s %12s %12s %10s\n' module "median (us)" "min (us)" "GB/s" "of peak"
  for m in "$module" "$bundle/modules/vector_add_cuda.ptx"; do
    for flush in "" --flush-l2; do
      json=$(kprof --format json time "$m" vadd --device cuda:0 --grid $((n / 256)) --block 256 \
        --arg "float32[$n]:zeros" --arg "float32[$n]:random" --arg "float32[$n]:random" \
        --arg "int32:$n" --repeat 20 --number 10 $flush) || { status=1; continue; }
      median=$(echo "$json" | grep -o '"median": *[0-9.e+-]*' | head -1 | awk '{print $2}')
      min=$(echo "$json" | grep -o '"min": *[0-9.e+-]*' | head -1 | awk '{print $2}')
      awk -v name="$(basename "$m")$flush" -v med="$median" -v min="$min" -v n="$n" -v peak="$peak" \
        'BEGIN { gbs = 12 * n / med / 1e9;
                 of = peak > 0 ? sprintf("%.0f%%", 100 * gbs / peak) : "?";
                 printf "%-28s %12.1f %12.1f %12.1f %10s\n", name, med * 1e6, min * 1e6, gbs, of }'
    done
  done
  echo "peak: ${peak:-unknown} GB/s (memory clock x bus width, as the driver reports them)"
  fi
else
  echo "kprofd did not start:"; cat "$scratch/kprofd.log"; status=1
fi
kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
rm -rf "$scratch"

section "CUDA unit tests (driver, inventory, module formats, launch checks, NVML)"
"$bundle/bin/core_test" --gtest_filter='Cuda*:ModuleFormat*:LaunchConfig*:KernelParams*:Nvml*:GetDeviceApi*' \
  --gtest_brief=1 || status=1

section "GPU jobs through kprofd (the gpu-labelled tests)"
"$bundle/bin/gpu_test" --gtest_brief=1 || status=1

section "CUDA service tests"
"$bundle/bin/service_test" --gtest_filter='*Cuda*:*InfoDescribesTheHost*' --gtest_brief=1 ||
  status=1
exit "$status"

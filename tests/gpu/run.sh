#!/usr/bin/env bash
# The GPU checks, on a lent GPU machine, from a bundle made here by `make gpu-bundle` (that
# machine has CUDA's driver but none of this project's packages and no network).
# Usage: run.sh [BUNDLE_DIR]   (default: the directory of this script)
# Prints what kprofd finds on the GPU host and runs the CUDA tests; each section says what it
# found, and the script ends non-zero when a test fails.
set -uo pipefail
bundle=$(cd "${1:-$(dirname "$0")}" && pwd)
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KPROF_TEST_KPROFD="$bundle/bin/kprofd" KPROF_TEST_MODULE_DIR="$bundle/modules"
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
  "$bundle/bin/kprof" --target "127.0.0.1:$(cat "$scratch/port")" info || status=1
else
  echo "kprofd did not start:"; cat "$scratch/kprofd.log"; status=1
fi
kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
rm -rf "$scratch"

section "CUDA unit tests (driver, inventory, module formats, launch checks, NVML)"
"$bundle/bin/core_test" --gtest_filter='Cuda*:ModuleFormat*:LaunchConfig*:KernelParams*:Nvml*' \
  --gtest_brief=1 || status=1

section "CUDA service tests"
"$bundle/bin/service_test" --gtest_filter='*Cuda*:*InfoDescribesTheHost*' --gtest_brief=1 ||
  status=1

section "not yet here"
echo "jobs on CUDA devices (and with them the vector-add bandwidth table) come with the rest of #10"
exit "$status"

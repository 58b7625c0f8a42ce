#!/usr/bin/env bash
# The main job of `make demo`: start kprofd on a free loopback port with a scratch cache, ask it
# what it has, time and profile builtin kernels through the kprof CLI, profile a small
# "model" layer by layer, and stop the daemon cleanly. Usage: demo/run-demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build/release}
kprofd="$build/server/kprofd"
kprof="$build/client/kprof"
scratch=$(mktemp -d)
daemon=""
cleanup() {
  if [[ -n "$daemon" ]] && kill -0 "$daemon" 2>/dev/null; then kill -KILL "$daemon"; fi
  rm -rf "$scratch"
}
trap cleanup EXIT

"$kprofd" --listen 127.0.0.1:0 --port-file "$scratch/port" --cache-dir "$scratch/cache" \
  2>"$scratch/kprofd.log" &
daemon=$!
for _ in $(seq 500); do [[ -s "$scratch/port" ]] && break; sleep 0.02; done
if [[ ! -s "$scratch/port" ]]; then
  echo "demo: kprofd did not start:" >&2
  cat "$scratch/kprofd.log" >&2
  exit 1
fi
export KPROF_TARGET="127.0.0.1:$(cat "$scratch/port")"

step() { printf '\n$ %s\n' "$*"; "$@"; }

step "$kprof" info
# The defaults: repeats of 1 ms or more until they agree within 1% (at least 10), 1 s at most.
step "$kprof" time builtin matmul --arg 'float32[256, 256]' --arg 'float32[256, 256]:random' \
  --arg 'float32[256, 256]:random'
step "$kprof" profile builtin matmul --arg 'float32[256, 256]' \
  --arg 'float32[256, 256]:random' --arg 'float32[256, 256]:random' --warmup 1 --number 10 \
  --collector rusage
cat >"$scratch/model.json" <<'JSON'
{"calls": [
  {"module": "builtin", "function": "matmul",
   "args": ["float32[128, 256]", "float32[128, 512]:random", "float32[512, 256]:random"]},
  {"module": "builtin", "function": "saxpy",
   "args": ["float32[32768]", "float32[32768]:random", "float32:0.5"]},
  {"module": "builtin", "function": "copy",
   "args": ["float32[32768]", "float32[32768]:random"]}],
 "repeat": 10, "warmup": 1}
JSON
step "$kprof" profile --sequence "$scratch/model.json" --collector rusage

printf '\n$ kill -TERM kprofd\n'
kill -TERM "$daemon"
status=0
wait "$daemon" || status=$?
daemon=""
cat "$scratch/kprofd.log"
if [[ $status -ne 0 ]]; then
  echo "demo: kprofd exited with status $status" >&2
  exit 1
fi
echo "kprofd stopped cleanly"

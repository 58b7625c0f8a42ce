#!/usr/bin/env bash
# `cmake --install` into a scratch prefix: the installed kprofd runs (finding its worker in
# libexec), and a downstream project builds against find_package(kprof) and talks to it.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
scratch=$(mktemp -d)
daemon=""
trap '[[ -n "$daemon" ]] && kill -KILL "$daemon" 2>/dev/null; rm -rf "$scratch"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
for f in bin/kprofd bin/kprof libexec/kprofd/kprofd-worker include/kprof/module_abi.h \
         include/kprof/v1/kprof.pb.h include/kprof/client/kprof_client.h \
         lib/cmake/kprof/kprofConfig.cmake lib/pkgconfig/kprof-module.pc \
         lib/systemd/system/kprofd.service share/kprofd/kprofd.conf.example; do
  [[ -e "$scratch/prefix/$f" ]] || fail "not installed: $f"
done

# No build tree beside it: the installed kprofd must find its worker in libexec.
"$scratch/prefix/bin/kprofd" --listen 127.0.0.1:0 --port-file "$scratch/port" \
  --cache-dir "$scratch/cache" 2>"$scratch/log" &
daemon=$!
for _ in $(seq 500); do [[ -s "$scratch/port" ]] && break; sleep 0.02; done
[[ -s "$scratch/port" ]] || fail "installed kprofd did not start: $(cat "$scratch/log")"

cmake -S "$source/tests/install/downstream" -B "$scratch/downstream" -G Ninja \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/downstream" >/dev/null
"$scratch/downstream/downstream" "127.0.0.1:$(cat "$scratch/port")"
"$scratch/prefix/bin/kprof" --target "127.0.0.1:$(cat "$scratch/port")" time builtin spin_us \
  --arg float64:10 >/dev/null || fail "installed kprof"

# A module built against the installed header alone: pkg-config's flags, and CMake's
# kprof::module_abi (the downstream project's module).
libdir=$(ls -d "$scratch"/prefix/lib*/pkgconfig | head -1)
cflags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags kprof-module) || fail "pkg-config kprof-module"
cflags=${cflags%% }
[[ "$cflags" == -I* && "$(realpath "${cflags#-I}")" == "$(realpath "$scratch/prefix/include")" ]] ||
  fail "kprof-module's cflags: $cflags"
cat >"$scratch/scale.c" <<'MODULE'
#include <kprof/module_abi.h>
KPROF_EXPORT int32_t scale(DLTensor* args, int32_t num_args) {
  if (num_args != 1) return 1;
  float* x = (float*)args[0].data;
  for (int64_t i = 0; i < kprof_num_elements(&args[0]); ++i) x[i] *= 2.0f;
  return 0;
}
MODULE
cc -O2 -shared -fPIC -fvisibility=hidden -nostdinc -isystem "$(cc -print-file-name=include)" \
  -isystem /usr/include -isystem "/usr/include/$(cc -dumpmachine)" $cflags \
  "$scratch/scale.c" -o "$scratch/scale.so" 2>"$scratch/cc.log" || fail "module with pkg-config: $(cat "$scratch/cc.log")"
kprof=("$scratch/prefix/bin/kprof" --target "127.0.0.1:$(cat "$scratch/port")")
"${kprof[@]}" time "$scratch/scale.so" scale --arg 'float32[64]:ones' >/dev/null ||
  fail "the module built with pkg-config's flags"
"${kprof[@]}" time "$scratch/downstream/libdownstream_module.so" twice \
  --arg 'float32[64]:ones' >/dev/null || fail "the module built with kprof::module_abi"
kill -TERM "$daemon"
wait "$daemon" || fail "kprofd exited non-zero"
daemon=""
echo "install: 7 passed, 0 failed"

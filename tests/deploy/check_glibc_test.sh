#!/usr/bin/env bash
# deploy/check-glibc.sh: kprofd's own programs need no C library newer than a Jetson's (glibc
# 2.35, Ubuntu 22.04 under JetPack 6), and a file that needs a newer one is named with its
# symbol. Usage: check_glibc_test.sh CHECK_GLIBC KPROFD KPROFD_WORKER KPROF
set -euo pipefail
check=$1; shift
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

out=$("$check" 2.35 "$@" 2>&1) || fail "kprofd's programs need a C library newer than 2.35: $out"
grep -q "check-glibc: 3 ELF files need GLIBC 2\.[0-9]* at most (limit 2.35)" <<<"$out" ||
  fail "the verdict: $out"
# Below what they need: each file and symbol past the limit is named, and the check fails.
if "$check" 2.2 "$1" 2>"$scratch/err" >/dev/null; then fail "a limit of 2.2 passed"; fi
grep -q "check-glibc: $1 needs [A-Za-z_0-9]*@GLIBC_2\.[0-9.]*, newer than 2.2" "$scratch/err" ||
  fail "the message: $(cat "$scratch/err")"
grep -q "symbol(s) need a runtime newer than the limits" "$scratch/err" || fail "the count"
# The C++ runtime's versions, for a bundle that uses the board's libstdc++: GCC 12's
# (Ubuntu 22.04) passes, GCC 4.8's (GLIBCXX_3.4.19) does not, naming the symbol.
out=$("$check" --glibcxx 3.4.30 --cxxabi 1.3.13 2.35 "$@" 2>&1) || fail "GCC 12's runtime: $out"
grep -q "GLIBCXX 3\.4\.[0-9]* (limit 3.4.30), CXXABI 1\.3\.[0-9]* (limit 1.3.13)" <<<"$out" ||
  fail "the C++ verdict: $out"
if "$check" --glibcxx 3.4.19 2.35 "$3" 2>"$scratch/err" >/dev/null; then
  fail "GLIBCXX 3.4.19 passed"
fi
grep -q "check-glibc: $3 needs [A-Za-z_0-9]*@GLIBCXX_3\.4\.[0-9]*, newer than 3.4.19" \
  "$scratch/err" || fail "the C++ message: $(cat "$scratch/err")"
# A directory: its ELF files, nothing else.
mkdir "$scratch/tree"
cp "$1" "$scratch/tree/"
echo "not an ELF file" >"$scratch/tree/README"
out=$("$check" 2.35 "$scratch/tree") || fail "a directory: $out"
grep -q "check-glibc: 1 ELF files need" <<<"$out" || fail "a directory's verdict: $out"
echo "check-glibc: 6 passed, 0 failed"

#!/usr/bin/env bash
# Which versions of the C library's symbols a set of ELF files needs: fails, naming each symbol
# and its file, when one is newer than MAX (a board's glibc: 2.35 on Ubuntu 22.04 / JetPack 6).
# With --glibcxx and --cxxabi, the same for the C++ runtime's symbol versions, for files that
# use the board's libstdc++ (GCC 12's on Ubuntu 22.04: GLIBCXX_3.4.30, CXXABI_1.3.13).
# readelf reads ELF files of any architecture, so it checks an arm64 bundle on an x86-64 host.
# Usage: check-glibc.sh [--glibcxx MAX] [--cxxabi MAX] MAX PATH...
#        (a PATH that is a directory: every ELF file beneath it)
set -euo pipefail
declare -A limit=()
while [ $# -gt 0 ]; do
  case $1 in
    --glibcxx) limit[GLIBCXX]=$2; shift 2 ;;
    --cxxabi) limit[CXXABI]=$2; shift 2 ;;
    *) break ;;
  esac
done
limit[GLIBC]=$1; shift
newer() {  # whether version $1 (2.36) is above $2 (2.35)
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$1" ] && [ "$1" != "$2" ]
}
files=()
for path in "$@"; do
  if [ -d "$path" ]; then
    while IFS= read -r f; do files+=("$f"); done < <(find "$path" -type f | sort)
  else
    files+=("$path")
  fi
done
checked=0 bad=0
declare -A highest=([GLIBC]=0 [GLIBCXX]=0 [CXXABI]=0)
for f in "${files[@]}"; do
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  checked=$((checked + 1))
  # One awk pass a file (a process per symbol made the test of three files take a minute):
  # "need FAMILY VERSION" for each family's newest, "over SYMBOL FAMILY VERSION" past a limit.
  while read -r kind a b c; do
    case $kind in
      need) if newer "$b" "${highest[$a]}"; then highest[$a]=$b; fi ;;
      over)
        echo "check-glibc: $f needs $a@${b}_$c, newer than ${limit[$b]}" >&2
        bad=$((bad + 1))
        ;;
    esac
  done < <(readelf -W --dyn-syms "$f" 2>/dev/null |
           awk -v limits="GLIBC=${limit[GLIBC]} GLIBCXX=${limit[GLIBCXX]:-} CXXABI=${limit[CXXABI]:-}" '
             # Whether dotted version a is above b (2.36 > 2.35, 3.4.30 > 3.4.9).
             function above(a, b,   x, y, i, n) {
               n = split(a, x, "."); split(b, y, ".")
               for (i = 1; i <= n || i in y; i++) {
                 if (x[i] + 0 != y[i] + 0) return x[i] + 0 > y[i] + 0
               }
               return 0
             }
             BEGIN { n = split(limits, l, " "); for (i = 1; i <= n; i++) {
                       split(l[i], kv, "="); if (kv[2] != "") limit[kv[1]] = kv[2] } }
             $7 == "UND" && $8 ~ /@(GLIBC|GLIBCXX|CXXABI)_[0-9.]+/ {
               split($8, p, "@"); v = p[2]; sub(/ .*/, "", v)
               family = v; sub(/_.*/, "", family); sub(/^[A-Z]+_/, "", v)
               if (!(family in limit)) next
               if (!(family in top) || above(v, top[family])) top[family] = v
               if (above(v, limit[family]) && !seen[p[1] "@" v]++) print "over", p[1], family, v
             }
             END { for (family in top) print "need", family, top[family] }')
  # A version needed with no symbol: GLIBC_ABI_DT_RELR marks packed relocations, which only
  # glibc 2.36 and later understand.
  if readelf -W -V "$f" 2>/dev/null | grep -q "Name: GLIBC_ABI_DT_RELR" &&
     newer 2.36 "${limit[GLIBC]}"; then
    echo "check-glibc: $f needs GLIBC_ABI_DT_RELR (packed relocations: glibc 2.36), newer than ${limit[GLIBC]}" >&2
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "check-glibc: $bad symbol(s) need a runtime newer than the limits" >&2
  exit 1
fi
summary="GLIBC ${highest[GLIBC]} at most (limit ${limit[GLIBC]})"
for family in GLIBCXX CXXABI; do
  if [ -n "${limit[$family]:-}" ]; then
    summary+=", $family ${highest[$family]} (limit ${limit[$family]})"
  fi
done
echo "check-glibc: $checked ELF files need $summary"

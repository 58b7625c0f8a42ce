#!/usr/bin/env bash
# Which versions of the C library's symbols a set of ELF files needs: fails, naming each symbol
# and its file, when one is newer than MAX (a board's glibc: 2.35 on Ubuntu 22.04 / JetPack 6).
# readelf reads ELF files of any architecture, so it checks an arm64 bundle on an x86-64 host.
# Usage: check-glibc.sh MAX PATH...   (a PATH that is a directory: every ELF file beneath it)
set -euo pipefail
max=$1; shift
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
checked=0 bad=0 highest=0
for f in "${files[@]}"; do
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  checked=$((checked + 1))
  while read -r symbol version; do
    if newer "$version" "$highest"; then highest=$version; fi
    if newer "$version" "$max"; then
      echo "check-glibc: $f needs $symbol@GLIBC_$version, newer than $max" >&2
      bad=$((bad + 1))
    fi
  done < <(readelf -W --dyn-syms "$f" 2>/dev/null |
           awk '$7 == "UND" && $8 ~ /@GLIBC_[0-9.]+/ {
                  split($8, p, "@"); v = p[2]; sub(/^GLIBC_/, "", v); sub(/ .*/, "", v);
                  print p[1], v }' | sort -u)
done
if [ "$bad" -gt 0 ]; then
  echo "check-glibc: $bad symbol(s) need a C library newer than $max" >&2
  exit 1
fi
echo "check-glibc: $checked ELF files need GLIBC $highest at most (limit $max)"

#!/usr/bin/env bash
# deploy/kprofd.service passes `systemd-analyze verify` and rates 2.0 or better (lower is
# safer) in `systemd-analyze security --offline=yes`. Usage: unit_file_test.sh UNIT KPROFD
set -euo pipefail
unit=$1 kprofd=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# verify wants ExecStart to exist: point it at the build's kprofd.
sed "s|^ExecStart=/usr/bin/kprofd|ExecStart=$kprofd|" "$unit" >"$scratch/kprofd.service"
systemd-analyze verify "$scratch/kprofd.service"
report=$(systemd-analyze security --offline=yes "$scratch/kprofd.service" 2>&1)
level=$(sed -n 's/.*Overall exposure level for kprofd.service: \([0-9.]*\).*/\1/p' <<<"$report")
if [[ -z "$level" ]]; then
  echo "no exposure level in: $report" >&2
  exit 1
fi
echo "exposure level $level (goal: 2.0 or better)"
awk -v level="$level" 'BEGIN { exit !(level <= 2.0) }'
echo "unit file: 2 passed, 0 failed"

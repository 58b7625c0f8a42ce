#!/usr/bin/env bash
# The .deb that `make package` builds: made with CPack in a scratch directory, unpacked with
# dpkg-deb -x (never installed on this host), and its kprofd runs. Usage: package_test.sh BUILD
set -euo pipefail
build=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cpack --config "$build/CPackConfig.cmake" -B "$scratch/out" >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log" >&2; exit 1; }
deb=$(ls "$scratch"/out/*.deb)
dpkg-deb --info "$deb" | grep -q "Package: kprofd"
dpkg-deb --info "$deb" | grep -q "Depends:.*libgrpc++"
dpkg-deb -x "$deb" "$scratch/root"
"$scratch/root/usr/bin/kprofd" --version | grep -q "^kprofd "
[[ -x "$scratch/root/usr/libexec/kprofd/kprofd-worker" ]]
[[ -f "$scratch/root/usr/lib/systemd/system/kprofd.service" ]]
echo "package $(basename "$deb"): 4 passed, 0 failed"

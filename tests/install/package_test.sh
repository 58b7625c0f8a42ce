#!/usr/bin/env bash
# The .deb that `make package` builds: made with CPack in a scratch directory, unpacked with
# dpkg-deb -x (never installed on this host), and its kprofd runs. Usage: package_test.sh BUILD
set -euo pipefail
build=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cpack --config "$build/CPackConfig.cmake" -B "$scratch/out" >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log" >&2; exit 1; }
fail() { echo "FAILED: $*" >&2; exit 1; }
deb=$(ls "$scratch"/out/*.deb)
# Captured first: `grep -q` on a pipe can end the writer with SIGPIPE, which pipefail reports.
info=$(dpkg-deb --info "$deb")
grep -q "Package: kprofd" <<<"$info" || fail "no package name in: $info"
grep -q "Depends:.*libgrpc++" <<<"$info" || fail "no gRPC dependency in: $info"
dpkg-deb -x "$deb" "$scratch/root"
version=$("$scratch/root/usr/bin/kprofd" --version)
grep -q "^kprofd " <<<"$version" || fail "kprofd --version printed: $version"
[[ -x "$scratch/root/usr/libexec/kprofd/kprofd-worker" ]] || fail "no worker in the package"
[[ -f "$scratch/root/usr/lib/systemd/system/kprofd.service" ]] || fail "no unit in the package"
echo "package $(basename "$deb"): 4 passed, 0 failed"

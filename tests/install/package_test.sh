#!/usr/bin/env bash
# The .debs that `make package` builds (kprofd, kprofd-dev): made with CPack in a scratch
# directory, unpacked with dpkg-deb -x (never installed on this host), and kprofd runs. Usage: package_test.sh BUILD
set -euo pipefail
build=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cpack --config "$build/CPackConfig.cmake" -B "$scratch/out" >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log" >&2; exit 1; }
fail() { echo "FAILED: $*" >&2; exit 1; }
deb=$(ls "$scratch"/out/kprofd_*.deb)
dev=$(ls "$scratch"/out/kprofd-dev_*.deb)
# Captured first: `grep -q` on a pipe can end the writer with SIGPIPE, which pipefail reports.
info=$(dpkg-deb --info "$deb")
grep -q "Package: kprofd$" <<<"$info" || fail "no package name in: $info"
grep -q "Depends:.*libgrpc++" <<<"$info" || fail "no gRPC dependency in: $info"
dpkg-deb -x "$deb" "$scratch/root"
version=$("$scratch/root/usr/bin/kprofd" --version)
grep -q "^kprofd " <<<"$version" || fail "kprofd --version printed: $version"
[[ -x "$scratch/root/usr/libexec/kprofd/kprofd-worker" ]] || fail "no worker in the package"
[[ -f "$scratch/root/usr/lib/systemd/system/kprofd.service" ]] || fail "no unit in the package"
[[ ! -e "$scratch/root/usr/include" ]] || fail "headers in the runtime package"
# Stripped programs; the daemon and the CLI do not load PAPI (the worker does).
sections=$(readelf -S "$scratch/root/usr/bin/kprofd")
! grep -q "debug_info" <<<"$sections" || fail "kprofd is not stripped"
needed=$(readelf -d "$scratch/root/usr/bin/kprofd" "$scratch/root/usr/bin/kprof")
! grep -q "libpapi" <<<"$needed" || fail "kprofd or kprof needs libpapi: $needed"
dev_info=$(dpkg-deb --info "$dev")
grep -q "Depends:.*libgrpc++-dev" <<<"$dev_info" || fail "no gRPC headers dependency in: $dev_info"
dpkg-deb -x "$dev" "$scratch/dev"
[[ -f "$scratch/dev/usr/include/kprof/client/kprof_client.h" ]] || fail "no client header in -dev"
[[ -f "$scratch/dev/usr/lib/cmake/kprof/kprofConfig.cmake" ]] || fail "no CMake package in -dev"
[[ -f "$scratch/dev/usr/include/kprof/module_abi.h" ]] || fail "no module header in -dev"
[[ "$(PKG_CONFIG_SYSROOT_DIR= PKG_CONFIG_PATH="$scratch/dev/usr/lib/pkgconfig" \
      pkg-config --variable=includedir kprof-module | xargs realpath)" == "$scratch/dev/usr/include" ]] ||
  fail "kprof-module.pc in -dev does not point at its headers"
# The Python client, where the build made it: importable from the unpacked tree.
checks=13
if python=$(ls "$scratch"/out/python3-kprof_*_all.deb 2>/dev/null); then
  py_info=$(dpkg-deb --info "$python")
  grep -q "Depends:.*python3-grpcio" <<<"$py_info" || fail "no grpcio dependency in: $py_info"
  dpkg-deb -x "$python" "$scratch/python"
  imported=$(PYTHONPATH="$scratch/python/usr/lib/python3/dist-packages" /usr/bin/python3 -c \
    'import kprof, kprof.v1.kprof_pb2 as pb; print(kprof.connect.__name__, pb.GetInfoRequest.__name__)')
  [[ "$imported" == "connect GetInfoRequest" ]] || fail "python3-kprof imports as: $imported"
  checks=13
fi
echo "packages: $(cd "$scratch/out" && ls *.deb | tr '\n' ' ')$checks passed, 0 failed"

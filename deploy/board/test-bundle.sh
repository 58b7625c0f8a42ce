#!/usr/bin/env bash
# The board bundle's tests, run under qemu-user in a root that stands for a freshly flashed
# board: of arm64 it holds the C library and the C++ runtime (what Ubuntu's base system always
# has) and the unpacked bundle in /opt/kprofd, nothing else: no project package, none of the
# libraries the bundle carries. /etc holds an Ubuntu 22.04 os-release and a JetPack 6.2
# nv_tegra_release, as a Jetson Orin's does. It checks that
#   - the programs start with the libraries of the bundle and the board alone (the loader's
#     own list of what it resolved, and where);
#   - a daemon started from the bundle serves: `kprof info` names the board's JetPack and L4T
#     release, and two autotuning candidates with one entry point measure their own known costs;
#   - the core and service test suites pass against the bundle's kprofd and kprof;
#   - the installer installs and uninstalls, and the .deb holds the same files, its scripts
#     running the same installer.
# Run as root (it makes the root with mounts of its own, in namespaces of its own).
# Usage: test-bundle.sh BUNDLE.tar.gz BUNDLE.deb TESTS_DIR BUSYBOX_DEB
#   TESTS_DIR: the test programs and modules/; BUSYBOX_DEB: Debian's busybox-static for arm64,
#   the board's shell and tools in the root.
set -euo pipefail
if [ "${KPROF_BOARD_NAMESPACES:-}" != yes ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test-bundle: needs root (it chroots into a root of its own, in new namespaces)" >&2
    exit 2
  fi
  # Mounts, network (loopback only) and processes of its own: nothing outlives the run.
  exec env KPROF_BOARD_NAMESPACES=yes unshare --mount --net --pid --fork --kill-child "$0" "$@"
fi
bundle=$(realpath "$1")
chroot=$(command -v chroot)  # the host's, found before the environment is emptied
deb=$(realpath "$2")
tests=$(realpath "$3")
busybox_deb=$(realpath "$4")
mount --make-rprivate /
ip link set lo up

root=$(mktemp -d /tmp/board-root.XXXXXX)
trap 'umount -R "$root" 2>/dev/null; rmdir "$root"' EXIT
mount -t tmpfs -o mode=0755 board-root "$root"
multiarch=usr/lib/aarch64-linux-gnu
mkdir -p "$root/$multiarch" "$root"/{etc,tmp,proc,sys,dev,opt,tests}
chmod 1777 "$root/tmp"
ln -s usr/lib "$root/lib"
# The board's own: the C library (Debian 12's 2.36 here; the bundle's symbols are checked
# against 2.35 separately) and the C++ runtime.
cp -L /lib/ld-linux-aarch64.so.1 "$root/usr/lib/"
board_libs=(libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2
            libstdc++.so.6 libgcc_s.so.1)
for lib in "${board_libs[@]}"; do cp -L "/$multiarch/$lib" "$root/$multiarch/"; done
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
printf 'root:x:0:\nvideo:x:44:\nnogroup:x:65534:\n' >"$root/etc/group"
printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
cat >"$root/etc/os-release" <<'EOF'
PRETTY_NAME="Ubuntu 22.04.5 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
ID=ubuntu
EOF
cat >"$root/etc/nv_tegra_release" <<'EOF'
# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025
# KERNEL_VARIANT: oot
TARGET_USERSPACE_LIB_DIR=nvidia
TARGET_USERSPACE_LIB_DIR_PATH=usr/lib/aarch64-linux-gnu/nvidia
EOF
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"

# The board's shell and tools, for the installer: BusyBox (arm64) stands for coreutils.
mkdir -p "$root/usr/bin" "$root/root"
ln -s usr/bin "$root/bin"
dpkg-deb --fsys-tarfile "$busybox_deb" | tar -xO ./bin/busybox >"$root/usr/bin/busybox"
chmod 755 "$root/usr/bin/busybox"
chroot "$root" /usr/bin/busybox --install -s /usr/bin
cp -a "$tests/." "$root/tests/"

passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }
# An arm64 program in the root, with no environment but what is given (no LD_LIBRARY_PATH).
run() { env -i PATH=/opt/kprofd/bin:/usr/bin "$chroot" "$root" "$@"; }

# 0. As the README says: the archive unpacked in a home directory, its installer run (no
#    systemd in this root: it says how to start kprofd instead). Then the installer's work:
#    the files, the unit naming them (with the Jetson drop-in), the configuration, the link.
cp "$bundle" "$root/root/"
name=$(basename "$bundle" .tar.gz)
if out=$(run sh -c "cd /root && tar -xzf $name.tar.gz && $name/install.sh --no-start" 2>&1); then
  pass "install.sh: $(tr '\n' ' ' <<<"$out")"
else
  fail "install.sh: $out"
fi
[ -x "$root/opt/kprofd/bin/kprofd" ] && [ -x "$root/opt/kprofd/libexec/kprofd/kprofd-worker" ] &&
  grep -qx "ExecStart=/opt/kprofd/bin/kprofd" "$root/etc/systemd/system/kprofd.service" &&
  grep -qx "DevicePolicy=auto" "$root/etc/systemd/system/kprofd.service.d/jetson.conf" &&
  grep -q "^listen = 127.0.0.1:9177" "$root/etc/kprofd/kprofd.conf" &&
  [ "$(readlink "$root/usr/local/bin/kprof")" = /opt/kprofd/bin/kprof ] &&
  pass "installed: /opt/kprofd, the unit and its Jetson drop-in, /etc/kprofd/kprofd.conf, kprof" ||
  fail "what install.sh left: $(cd "$root" && find opt/kprofd/bin etc usr/local -maxdepth 3 | tr '\n' ' ')"
# Refusals, each saying why: not root, an unknown option.
if out=$(env -i PATH=/usr/bin "$chroot" --userspec=65534:65534 "$root" /root/$name/install.sh 2>&1) ||
   ! grep -q "run as root" <<<"$out"; then
  fail "install.sh as nobody: $out"
else
  pass "install.sh as nobody refuses: $out"
fi
if out=$(run /root/$name/install.sh --prefx /x 2>&1) || ! grep -q "unknown option '--prefx'" <<<"$out"; then
  fail "install.sh --prefx: $out"
else
  pass "install.sh refuses an unknown option: $(head -1 <<<"$out")"
fi
# On this x86-64 host itself (not the arm64 root): refused, naming the machine; nothing made.
if out=$(env -i PATH=/usr/bin:/bin sh "$root/root/$name/install.sh" --prefix /tmp/kprofd-x86 2>&1) ||
   ! grep -q "this bundle is for arm64 (aarch64) boards; this machine is x86_64" <<<"$out" ||
   [ -e /tmp/kprofd-x86 ]; then
  fail "install.sh on x86-64: $out"
else
  pass "install.sh on an x86-64 machine refuses: $out"
fi
# A directory that is not a bundle is neither replaced nor removed; / is no prefix.
mkdir -p "$root/srv/data" && echo keep >"$root/srv/data/file"
if out=$(run /root/$name/install.sh --no-start --prefix /srv/data 2>&1) ||
   ! grep -q "is not a kprofd bundle" <<<"$out" || [ ! -e "$root/srv/data/file" ]; then
  fail "install.sh --prefix over another directory: $out"
elif out2=$(run /root/$name/install.sh --uninstall --prefix /srv/data/ 2>&1) ||
     [ ! -e "$root/srv/data/file" ]; then
  fail "install.sh --uninstall --prefix of another directory: $out2"
elif out3=$(run /root/$name/install.sh --prefix / 2>&1) || ! grep -q "cannot be /" <<<"$out3"; then
  fail "install.sh --prefix /: $out3"
else
  pass "install.sh leaves what is not a bundle alone: $out | $out2 | $out3"
fi
# Again over itself, from a prefix written with a trailing slash: the configuration made the
# first time stays as edited; kprof runs through its link on the PATH ($ORIGIN through it).
echo "# edited" >>"$root/etc/kprofd/kprofd.conf"
if out=$(run /root/$name/install.sh --no-start --prefix /opt/kprofd/ 2>&1) &&
   [ ! -e "$root/opt/kprofd.new" ] && [ ! -e "$root/opt/kprofd/.new" ] &&
   grep -qx "# edited" "$root/etc/kprofd/kprofd.conf" &&
   grep -qx "ExecStart=/opt/kprofd/bin/kprofd" "$root/etc/systemd/system/kprofd.service" &&
   link=$(run /usr/local/bin/kprof --version 2>&1); then
  pass "installed again over itself (the configuration kept); /usr/local/bin/kprof: $link"
else
  fail "install.sh over an install: $out ${link:-}"
fi
# Elsewhere, beside it: the unit names that prefix's kprofd; uninstalled again.
if out=$(run /root/$name/install.sh --no-start --prefix /srv/kprofd 2>&1) &&
   grep -qx "ExecStart=/srv/kprofd/bin/kprofd" "$root/etc/systemd/system/kprofd.service" &&
   run /srv/kprofd/bin/kprofd --version >/dev/null 2>&1 &&
   out2=$(run /srv/kprofd/install.sh --uninstall --prefix /srv/kprofd 2>&1) &&
   [ ! -e "$root/srv/kprofd" ] && out3=$(run /root/$name/install.sh --no-start 2>&1); then
  pass "install.sh --prefix /srv/kprofd, then --uninstall there: $out2"
else
  fail "install.sh --prefix /srv/kprofd: $out ${out2:-} ${out3:-}"
fi

# 1. Each program's libraries, as the board's loader resolves them: every one from the bundle
#    or from the board's own few, and none missing.
for program in bin/kprofd bin/kprof libexec/kprofd/kprofd-worker; do
  if ! list=$(run /usr/lib/ld-linux-aarch64.so.1 --list "/opt/kprofd/$program" 2>&1); then
    fail "$program does not load: $list"
    continue
  fi
  stray=$(awk '/=>/ && $3 !~ /^\/opt\/kprofd\// && $3 !~ /^\/(usr\/)?lib\/(aarch64-linux-gnu\/|ld-linux-aarch64)/ {print}' <<<"$list")
  from_board=$(awk '$3 ~ /aarch64-linux-gnu/ {print $1}' <<<"$list" | sort | tr '\n' ' ')
  if grep -q "not found" <<<"$list"; then
    fail "$program: $(grep "not found" <<<"$list" | tr -s ' \t' ' ')"
  elif [ -n "$stray" ]; then
    fail "$program loads from outside the bundle and the board: $stray"
  else
    pass "$program: $(grep -c '=> /opt/kprofd/' <<<"$list") libraries from the bundle," \
         "from the board: $from_board"
  fi
done
if version=$(run /opt/kprofd/bin/kprofd --version 2>&1); then pass "kprofd --version: $version"
else fail "kprofd --version: $version"; fi

# 2. A daemon from the bundle, and the CLI beside it.
if ! pid=$(run /opt/kprofd/bin/kprofd --listen 127.0.0.1:0 --port-file /tmp/port \
             --cache-dir /tmp/cache --detach 2>"$root/tmp/kprofd.log"); then
  fail "kprofd did not start: $(cat "$root/tmp/kprofd.log")"
else
  target=127.0.0.1:$(cat "$root/tmp/port")
  kprof() { run /opt/kprofd/bin/kprof --target "$target" "$@"; }
  if info=$(kprof info 2>&1); then
    if grep -q "^jetson: JetPack 6.2 (L4T R36.4.3, board generic)" <<<"$info" &&
       grep -q "^os: Ubuntu 22.04.5 LTS" <<<"$info"; then
      pass "kprof info names the board: $(grep -E '^(os|jetson):' <<<"$info" | tr '\n' ' ')"
    else
      fail "kprof info does not name JetPack 6.2 / L4T R36.4.3 and Ubuntu 22.04.5: $info"
    fi
  else
    fail "kprof info: $info"
  fi
  # The board's CUDA driver where JetPack 6 puts it (nvidia/, not on the loader's path here):
  # a stand-in libcuda, so kprofd finds it by that path and lists its GPU.
  if [ -f "$root/tests/fake-cuda/libcuda.so.1" ]; then
    mkdir -p "$root/$multiarch/nvidia"
    cp "$root/tests/fake-cuda/libcuda.so.1" "$root/$multiarch/nvidia/"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$root/tmp/port"
    if pid=$(run /opt/kprofd/bin/kprofd --listen 127.0.0.1:0 --port-file /tmp/port \
               --cache-dir /tmp/cache --detach 2>"$root/tmp/kprofd.log"); then
      target=127.0.0.1:$(cat "$root/tmp/port")
      if info=$(kprof info 2>&1) && grep -q "^cuda:0 " <<<"$info"; then
        pass "the driver found under /$multiarch/nvidia: $(grep "^cuda:0 " <<<"$info")"
      else
        fail "no cuda:0 with libcuda.so.1 under /$multiarch/nvidia: $info"
      fi
    else
      fail "kprofd did not start again: $(cat "$root/tmp/kprofd.log")"
    fi
    rm -rf "$root/$multiarch/nvidia"  # the suites below run on a board without a GPU
  fi
  # Two candidates, one entry point: each its own cost (2 ms and 6 ms of sleep), within 25%.
  for k in 1 3; do
    want_ms=$((2 * k))
    if json=$(kprof --format json time "/tests/modules/candidate_$k.so" gemm --repeat 5 \
                --number 1 2>&1); then
      median=$(grep -o '"median": *[0-9.e+-]*' <<<"$json" | head -1 | awk '{print $2}')
      got_ms=$(awk -v s="${median:-0}" 'BEGIN { printf "%.2f", s * 1e3 }')
      if awk -v got="$got_ms" -v want="$want_ms" 'BEGIN { exit !(got > 0.75 * want && got < 1.25 * want) }'; then
        pass "candidate_$k.so gemm: median $got_ms ms (takes $want_ms ms)"
      else
        fail "candidate_$k.so gemm: median $got_ms ms, not within 25% of $want_ms ms: $json"
      fi
    else
      fail "kprof time candidate_$k.so: $json"
    fi
  done
  kill -TERM "$pid" 2>/dev/null || true
fi

# 3. The test suites against the bundle's programs. The test programs are not the bundle's:
#    they find its libraries (and the few only they need) by LD_LIBRARY_PATH, which the
#    daemons they start do not need (checked above); a test module that links another (by
#    SONAME) finds it in the modules' directory the same way, as its build tree's RUNPATH.
extra=$(mktemp -d)
for t in "$root"/tests/*_test; do
  readelf -d "$t" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
done | sort -u | while read -r lib; do
  [ -e "$root/opt/kprofd/lib/$lib" ] || [ -e "$root/$multiarch/$lib" ] ||
    cp -L "/$multiarch/$lib" "$extra/"
done
mkdir -p "$root/tests/lib"
cp -a "$extra/." "$root/tests/lib/"
rm -rf "$extra"
for t in core_test service_test; do
  if env -i PATH=/opt/kprofd/bin HOME=/tmp TMPDIR=/tmp KPROF_TEST_EMULATOR=qemu-user \
       KPROF_TEST_KPROFD=/opt/kprofd/bin/kprofd KPROF_TEST_KPROF=/opt/kprofd/bin/kprof \
       KPROF_TEST_MODULE_DIR=/tests/modules LD_LIBRARY_PATH=/opt/kprofd/lib:/tests/lib:/tests/modules \
       "$chroot" "$root" "/tests/$t" --gtest_brief=1 >"$root/tmp/$t.log" 2>&1; then
    pass "$t: $(grep -E '^\[  PASSED  \]' "$root/tmp/$t.log" | head -1)"
  else
    tail -40 "$root/tmp/$t.log" >&2
    fail "$t (its failures above)"
  fi
done

# 4. The uninstaller: the unit, its Jetson drop-in, the link and the files go; the
#    configuration and the administrator's own drop-ins stay.
printf '[Service]\nLoadCredential=tokens:/etc/kprofd/tokens\n' \
  >"$root/etc/systemd/system/kprofd.service.d/secrets.conf"
if out=$(run /opt/kprofd/install.sh --uninstall 2>&1) && [ ! -e "$root/opt/kprofd" ] &&
   [ ! -e "$root/etc/systemd/system/kprofd.service" ] && [ ! -L "$root/usr/local/bin/kprof" ] &&
   [ ! -e "$root/etc/systemd/system/kprofd.service.d/jetson.conf" ] &&
   [ -e "$root/etc/systemd/system/kprofd.service.d/secrets.conf" ] &&
   [ -e "$root/etc/kprofd/kprofd.conf" ]; then
  pass "install.sh --uninstall: $out"
else
  fail "install.sh --uninstall: $out"
fi

# 5. The .deb: the tarball's files, byte for byte, under /opt/kprofd; its postinst installs the
#    unit from them (dpkg has put them in place), its prerm takes it away and leaves the files.
compare=$(mktemp -d)
dpkg-deb -x "$deb" "$compare/deb"
tar -C "$compare" -xzf "$bundle"
if out=$(diff -r "$compare/deb/opt/kprofd" "$compare/$name" 2>&1); then
  pass "the .deb holds the tarball's files: $(find "$compare/deb/opt/kprofd" -type f | wc -l) files"
else
  fail "the .deb and the tarball differ: $out"
fi
cp -a "$compare/deb/opt/kprofd" "$root/opt/kprofd"
dpkg-deb -e "$deb" "$root/tmp/control"
rm -rf "$compare"
if out=$(run sh /tmp/control/postinst configure 2>&1) &&
   grep -qx "ExecStart=/opt/kprofd/bin/kprofd" "$root/etc/systemd/system/kprofd.service"; then
  pass "the .deb's postinst: $(tr '\n' ' ' <<<"$out")"
else
  fail "the .deb's postinst: $out"
fi
# An upgrade: the old prerm keeps the unit, the new postinst (configure OLD-VERSION) rewrites it.
if out=$(run sh /tmp/control/prerm upgrade 0.2.0 2>&1) &&
   [ -e "$root/etc/systemd/system/kprofd.service" ] &&
   out2=$(run sh /tmp/control/postinst configure 0.0.9 2>&1) &&
   grep -qx "ExecStart=/opt/kprofd/bin/kprofd" "$root/etc/systemd/system/kprofd.service"; then
  pass "the .deb's upgrade: prerm upgrade keeps the unit; postinst configure 0.0.9: $(tr '\n' ' ' <<<"$out2")"
else
  fail "the .deb's upgrade: $out ${out2:-}"
fi
if out=$(run sh /tmp/control/prerm remove 2>&1) &&
   [ ! -e "$root/etc/systemd/system/kprofd.service" ] && [ -x "$root/opt/kprofd/bin/kprofd" ]; then
  pass "the .deb's prerm: $out"
else
  fail "the .deb's prerm: $out"
fi
# A removal after the files were taken by hand: prerm has nothing to undo, and says nothing.
rm -rf "$root/opt/kprofd"
if out=$(run sh /tmp/control/prerm remove 2>&1); then
  pass "the .deb's prerm with the installer gone: exits 0"
else
  fail "the .deb's prerm with the installer gone: $out"
fi

echo "test-bundle: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

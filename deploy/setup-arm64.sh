#!/usr/bin/env bash
# What an arm64 cross build and its runs under qemu-user need on a Debian 12 x86-64 host: the
# cross compiler, the arm64 -dev packages of kprofd's dependencies (multiarch), qemu-user and
# its binfmt_misc handler. Checks, and with --setup installs what is missing (it adds the arm64
# architecture to dpkg, so only when asked). Shared by test-arm64.sh and board-bundle.sh.
# Usage: setup-arm64.sh [--setup] [WHO]   (WHO names the caller in messages)
set -euo pipefail
setup=no
if [ "${1:-}" = "--setup" ]; then setup=yes; shift; fi
who=${1:-setup-arm64}
arm64_packages=(crossbuild-essential-arm64 qemu-user-static
  libgrpc++-dev:arm64 libprotobuf-dev:arm64 libabsl-dev:arm64 libgtest-dev:arm64
  libgmock-dev:arm64 libssl-dev:arm64 libpapi-dev:arm64 libseccomp-dev:arm64
  libbenchmark-dev:arm64
  # prometheus-cpp's libraries, not its -dev package: that one is for one architecture at a
  # time (it depends on the civetweb program) and would take the host's away; the cross build
  # uses the host's headers with these.
  libprometheus-cpp-core1.0:arm64 libprometheus-cpp-pull1.0:arm64)
missing=()
for p in "${arm64_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$setup" != yes ]; then
    echo "$who: missing ${missing[*]}" >&2
    echo "$who: 'make $who ARM64_SETUP=yes' adds the arm64 architecture to dpkg and installs them" >&2
    exit 2
  fi
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The kernel runs arm64 programs through qemu (tests start kprofd, kprofd starts its workers).
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/register" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo mount -t binfmt_misc binfmt_misc "$binfmt"
fi
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  # Debian's own registration (qemu-user-static), which systemd-binfmt would load at boot.
  grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf | $sudo tee "$binfmt/register" >/dev/null
fi
# arm64 programs find their libraries in the multiarch tree (/lib/aarch64-linux-gnu), which the
# arm64 packages installed: no sysroot prefix for qemu.


#!/usr/bin/env bash
# Installs the Debian 12 packages that kprofd's build, tests and demo need, and nothing else.
#
# Idempotent: when every package is present it changes nothing and does not touch the network;
# otherwise it runs `apt-get update` once and installs only what is missing. Works as root or
# through sudo. Usage: deploy/install-deps.sh [--check]   (--check: report, install nothing)
set -euo pipefail

# One line per package, with what needs it. Keep this list exact: CI installs from it on a
# fresh machine, so a package missing here is a build that only works on a developer's box.
packages=(
  gcc                 # C compiler for the test modules (tests/modules/*.c)
  g++                 # C++17 compiler
  make                # the root Makefile
  cmake               # the build (3.25)
  ninja-build         # the CMake generator used by the presets
  ccache              # keeps rebuilds on 2 cores quick; used when present
  pkg-config          # how CMake finds libraries without a CMake package
  libabsl-dev         # absl::Status, StatusOr, strings, synchronization
  nlohmann-json3-dev  # the standard JSON report
  libdlpack-dev       # DLTensor, the module ABI's argument type
  libssl-dev          # SHA-256 of argument bytes (OpenSSL)
  libgtest-dev        # unit and integration tests
  libgmock-dev        # matchers used by the tests
)

check_only=0
case "${1:-}" in
  --check) check_only=1 ;;
  "") ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install-deps: unknown option '$1' (accepted: --check, --help)" >&2; exit 2 ;;
esac

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if ((check_only)); then exit 1; fi

if [[ $EUID -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: installing needs root: run as root or install sudo" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-deps: apt-get update"
"${as_root[@]}" apt-get update -qq
echo "install-deps: installing ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"

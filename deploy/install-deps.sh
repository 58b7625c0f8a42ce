#!/usr/bin/env bash
# Installs the Debian 12 packages that kprofd's build, tests and demo need, and nothing else.
#
# Idempotent: when every package is present it changes nothing and does not touch the network;
# otherwise it runs `apt-get update` once and installs only what is missing. Works as root or
# through sudo. Usage: deploy/install-deps.sh [--check] [--fuzz]
#   --check  report what is missing, install nothing
#   --fuzz   also what `make fuzz` needs (clang and its libFuzzer runtime)
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
  libcli11-dev        # the kprof CLI's command-line parsing (header-only)
  libgtest-dev        # unit and integration tests
  libgmock-dev        # matchers used by the tests
  libbenchmark-dev    # Google Benchmark: the in-process reference of make bench
  libbenchmark-tools  # Google Benchmark's compare.py, which reads kprof's --format gbench (tests)
  protobuf-compiler   # protoc, for proto/kprof/v1/*.proto
  libprotobuf-dev     # the generated messages' runtime
  protobuf-compiler-grpc  # grpc_cpp_plugin, grpc_python_plugin (the Python client's stubs)
  libgrpc++-dev       # kprofd's service and the client (with reflection)
  python3-grpcio      # the Python client; an independent gRPC client for the health test
  python3-protobuf    # the Python client's messages
  python3-pytest      # the Python client's tests
  python3-scipy       # the independent reference of kprof compare's U test (tests)
  python3-numpy       # expected data as NumPy arrays and .npy files (the check tests)
  chromium            # renders kprof's SVG plots headless in the tests
  openssl             # the TLS tests make their certificates
  prometheus-cpp-dev  # kprofd's /metrics (--metrics-listen)
  prometheus          # a real Prometheus server scrapes a real kprofd in the tests
  tmux                # kprof top is tested live in a terminal (a tmux pane)
  iproute2            # the README test brings up the loopback of its own network namespace
  util-linux          # unshare and mount, for the README test's namespaces
  libpapi-dev         # the PAPI hardware-counter collector
  libseccomp-dev      # the worker's syscall filter
  systemd             # systemd-analyze, which checks the unit file in the tests
  clang               # make check-clang: -Wthread-safety over the lock annotations (CI); libFuzzer
)
fuzz_packages=(
  libclang-rt-14-dev  # the libFuzzer and sanitizer runtimes for clang
)

check_only=0
for option in "$@"; do
  case "$option" in
    --check) check_only=1 ;;
    --fuzz) packages+=("${fuzz_packages[@]}") ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown option '$option' (accepted: --check, --fuzz, --help)" >&2
       exit 2 ;;
  esac
done

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

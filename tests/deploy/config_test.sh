#!/usr/bin/env bash
# kprofd --check-config: the example config passes; a bad key or value fails naming the file,
# the line and the key; the command line wins over the file. Usage: config_test.sh CONF KPROFD
set -euo pipefail
conf=$1 kprofd=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

ok=$("$kprofd" --config "$conf" --check-config) || fail "example config refused"
grep -q "configuration OK" <<<"$ok" || fail "example config: $ok"

printf 'listen = 127.0.0.1:0\n# comment\nmax-queu = 3\n' >"$scratch/typo.conf"
if "$kprofd" --config "$scratch/typo.conf" --check-config 2>"$scratch/err"; then fail "typo accepted"; fi
grep -q "typo.conf:3: key 'max-queu': unknown option '--max-queu'" "$scratch/err" ||
  fail "typo message: $(cat "$scratch/err")"

printf 'job-timeout = soon\n' >"$scratch/value.conf"
if "$kprofd" --config "$scratch/value.conf" --check-config 2>"$scratch/err"; then fail "bad value"; fi
grep -q "value.conf:1: key 'job-timeout': --job-timeout wants a duration" "$scratch/err" ||
  fail "value message: $(cat "$scratch/err")"

printf 'listen = 0.0.0.0:9177\n' >"$scratch/open.conf"
if "$kprofd" --config "$scratch/open.conf" --check-config 2>"$scratch/err"; then fail "open listen"; fi
grep -q "refusing to listen on 0.0.0.0:9177" "$scratch/err" || fail "open message"
# The command line wins over the file.
"$kprofd" --config "$scratch/open.conf" --listen 127.0.0.1:0 --check-config >/dev/null ||
  fail "the command line did not win"

# A bare port is no address: said so, with what is.
if "$kprofd" --listen 9177 --check-config 2>"$scratch/err"; then fail "bare port accepted"; fi
grep -q "listen '9177' is not HOST:PORT (127.0.0.1:9177 on loopback" "$scratch/err" ||
  fail "bare port message: $(cat "$scratch/err")"

printf 'max-queue = 0\n' >"$scratch/queue.conf"
if "$kprofd" --config "$scratch/queue.conf" --check-config 2>"$scratch/err"; then fail "queue 0"; fi
grep -q "max-queue wants 1 to 1000000" "$scratch/err" || fail "queue message"

printf 'token-file = %s/missing\n' "$scratch" >"$scratch/token.conf"
if "$kprofd" --config "$scratch/token.conf" --check-config 2>"$scratch/err"; then fail "no token file"; fi
grep -q "cannot read token file" "$scratch/err" || fail "token message"
# Worker placement: CPUs this daemon may not use, or a priority it cannot take, are refused at
# start rather than failing every job.
if "$kprofd" --pin-cpus 1000 --check-config 2>"$scratch/err"; then fail "CPU 1000 accepted"; fi
grep -q "pin-cpus 1000: CPU 1000 is not among the CPUs this daemon may use" "$scratch/err" ||
  fail "pin message: $(cat "$scratch/err")"
if "$kprofd" --pin-cpus 0-x --check-config 2>"$scratch/err"; then fail "bad CPU list"; fi
grep -q "'0-x' is not a CPU or a range" "$scratch/err" || fail "CPU list message: $(cat "$scratch/err")"
printf 'worker-priority = fast
' >"$scratch/priority.conf"
if "$kprofd" --config "$scratch/priority.conf" --check-config 2>"$scratch/err"; then fail "fast"; fi
grep -q "accepted: nice:N with N from -20 to 19, or fifo:N" "$scratch/err" ||
  fail "priority message: $(cat "$scratch/err")"
"$kprofd" --pin-cpus 0 --worker-priority nice:5 --check-config >/dev/null ||
  fail "a lower priority on CPU 0 refused"
echo "config: 11 passed, 0 failed"

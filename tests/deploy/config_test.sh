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
grep -q "typo.conf:3: key 'max-queu': unknown option '--max-queu' (did you mean --max-queue?" \
  "$scratch/err" || fail "typo message: $(cat "$scratch/err")"

# Every mistake of a file at once, each at its line.
printf 'cache_dir = /tmp/x\nlisten = 127.0.0.1:0\nbogus_key = 3\nmax-queue = abc\n' >"$scratch/three.conf"
if "$kprofd" --config "$scratch/three.conf" --check-config 2>"$scratch/err"; then fail "three accepted"; fi
grep -q "3 mistakes in $scratch/three.conf:" "$scratch/err" || fail "three: $(cat "$scratch/err")"
grep -q "three.conf:1: key 'cache_dir': unknown option '--cache_dir' (did you mean --cache-dir?" \
  "$scratch/err" || fail "three, line 1: $(cat "$scratch/err")"
grep -q "three.conf:3: key 'bogus_key': unknown option '--bogus_key' (kprofd --help" \
  "$scratch/err" || fail "three, line 3: $(cat "$scratch/err")"
grep -q "three.conf:4: key 'max-queue': --max-queue wants an integer, got 'abc'" "$scratch/err" ||
  fail "three, line 4: $(cat "$scratch/err")"

printf 'job-timeout = soon\n' >"$scratch/value.conf"
if "$kprofd" --config "$scratch/value.conf" --check-config 2>"$scratch/err"; then fail "bad value"; fi
grep -q "value.conf:1: key 'job-timeout': --job-timeout wants a duration" "$scratch/err" ||
  fail "value message: $(cat "$scratch/err")"

printf 'listen = 0.0.0.0:9177\n' >"$scratch/open.conf"
if "$kprofd" --config "$scratch/open.conf" --check-config 2>"$scratch/err"; then fail "open listen"; fi
grep -q "open.conf:1: refusing to listen on 0.0.0.0:9177 (--listen)" "$scratch/err" ||
  fail "open message: $(cat "$scratch/err")"
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
grep -q "token.conf:1: --token-file: cannot read token file" "$scratch/err" ||
  fail "token message: $(cat "$scratch/err")"
# Worker placement: CPUs this daemon may not use, or a priority it cannot take, are refused at
# start rather than failing every job.
if "$kprofd" --pin-cpus 1000 --check-config 2>"$scratch/err"; then fail "CPU 1000 accepted"; fi
grep -q "^kprofd: INVALID_ARGUMENT: --pin-cpus 1000: CPU 1000 is not among the CPUs this daemon may use" \
  "$scratch/err" || fail "pin message: $(cat "$scratch/err")"
# A value the file set is found at its line, as a key is.
printf 'listen = 127.0.0.1:0\n\npin-cpus = 1000\n' >"$scratch/pin.conf"
if "$kprofd" --config "$scratch/pin.conf" --check-config 2>"$scratch/err"; then fail "CPU 1000 (file)"; fi
grep -q "pin.conf:3: --pin-cpus 1000: CPU 1000 is not among" "$scratch/err" ||
  fail "pin line: $(cat "$scratch/err")"
# ...unless the command line gave it, which wins.
if "$kprofd" --config "$scratch/pin.conf" --pin-cpus 999 --check-config 2>"$scratch/err"; then
  fail "CPU 999"
fi
grep -q "^kprofd: INVALID_ARGUMENT: --pin-cpus 999" "$scratch/err" || fail "pin given: $(cat "$scratch/err")"
if "$kprofd" --pin-cpus 0-x --check-config 2>"$scratch/err"; then fail "bad CPU list"; fi
grep -q "'0-x' is not a CPU or a range" "$scratch/err" || fail "CPU list message: $(cat "$scratch/err")"
printf 'worker-priority = fast
' >"$scratch/priority.conf"
if "$kprofd" --config "$scratch/priority.conf" --check-config 2>"$scratch/err"; then fail "fast"; fi
grep -q "accepted: nice:N with N from -20 to 19, or fifo:N" "$scratch/err" ||
  fail "priority message: $(cat "$scratch/err")"
"$kprofd" --pin-cpus 0 --worker-priority nice:5 --check-config >/dev/null ||
  fail "a lower priority on CPU 0 refused"

# What the start would meet, checked: the directories (probed, not made), the addresses (bound
# and let go), the metrics address's policy.
printf 'cache-dir = /etc/passwd/cache\n' >"$scratch/cache.conf"
if "$kprofd" --config "$scratch/cache.conf" --check-config 2>"$scratch/err"; then fail "cache in a file"; fi
grep -q "cache.conf:1: cannot create '/etc/passwd/cache' (--cache-dir): '/etc/passwd' is not a directory" \
  "$scratch/err" || fail "cache message: $(cat "$scratch/err")"
if "$kprofd" --cache-dir /proc/kprofd/cache --check-config 2>"$scratch/err"; then fail "cache in /proc"; fi
grep -q "cannot create '/proc/kprofd/cache' (--cache-dir): '/proc' is not writable" "$scratch/err" ||
  fail "cache /proc message: $(cat "$scratch/err")"
if "$kprofd" --cache-dir "$scratch/c" --state-dir /proc/kprofd --check-config 2>"$scratch/err"; then
  fail "state in /proc"
fi
grep -q "(--state-dir)" "$scratch/err" || fail "state message: $(cat "$scratch/err")"
[ ! -e "$scratch/c" ] || fail "--check-config made the cache directory"
if "$kprofd" --cache-dir /etc/passwd/ --check-config 2>"$scratch/err"; then fail "a file as the cache"; fi
grep -q "'/etc/passwd' (--cache-dir) is not a directory" "$scratch/err" ||
  fail "file cache message: $(cat "$scratch/err")"
if "$kprofd" --listen 192.0.2.1:0 --insecure-allow-unauthenticated --check-config 2>"$scratch/err"; then
  fail "a foreign address"
fi
grep -q -- "--listen 192.0.2.1:0: cannot listen there: Cannot assign requested address" "$scratch/err" ||
  fail "bind message: $(cat "$scratch/err")"
printf 'metrics-listen = 0.0.0.0:9178\n' >"$scratch/metrics.conf"
if "$kprofd" --config "$scratch/metrics.conf" --check-config 2>"$scratch/err"; then fail "metrics open"; fi
grep -q "metrics.conf:1: refusing to serve metrics on 0.0.0.0:9178 (--metrics-listen)" "$scratch/err" ||
  fail "metrics message: $(cat "$scratch/err")"
# A port another program holds now is a note, not a failure: the daemon checked may be the one
# that holds it.
/usr/bin/python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
open("'"$scratch"'/held.tmp", "w").write(str(s.getsockname()[1]))
__import__("os").rename("'"$scratch"'/held.tmp", "'"$scratch"'/held"); time.sleep(60)' &
holder=$!
for _ in $(seq 100); do [ -s "$scratch/held" ] && break; sleep 0.1; done
held=$(cat "$scratch/held")
"$kprofd" --listen "127.0.0.1:$held" --check-config 2>"$scratch/err" >/dev/null ||
  fail "a held port failed the check: $(cat "$scratch/err")"
kill "$holder"
grep -q "note: --listen 127.0.0.1:$held: port in use" "$scratch/err" ||
  fail "held port note: $(cat "$scratch/err")"

# Sizes take units, as --help writes them.
printf 'max-module-bytes = 256 MiB\nmax-cache-bytes = 4G\nworker-memory-limit = 1.5 GiB\n' >"$scratch/sizes.conf"
"$kprofd" --config "$scratch/sizes.conf" --check-config >/dev/null 2>"$scratch/err" ||
  fail "sizes with units: $(cat "$scratch/err")"
printf 'max-module-bytes = 256 MB of it\n' >"$scratch/size.conf"
if "$kprofd" --config "$scratch/size.conf" --check-config 2>"$scratch/err"; then fail "bad size"; fi
grep -q "size.conf:1: key 'max-module-bytes': --max-module-bytes wants a size in bytes: 268435456, 256 MiB" \
  "$scratch/err" || fail "size message: $(cat "$scratch/err")"

# Which config file is read: --help names the default, the start logs the one it read.
"$kprofd" --help | tr -s ' \n' ' ' | grep -q "else /etc/kprofd/kprofd.conf, where either exists" ||
  fail "--help does not name the default config file"
printf 'listen = 127.0.0.1:0\ncache-dir = %s/cache\nport-file = %s/port\n' "$scratch" "$scratch" \
  >"$scratch/serve.conf"
"$kprofd" --config "$scratch/serve.conf" 2>"$scratch/log" &
daemon=$!
for _ in $(seq 100); do [ -s "$scratch/port" ] && break; sleep 0.2; done
kill -TERM "$daemon"; wait "$daemon" || true
grep -q "options from $scratch/serve.conf" "$scratch/log" || fail "the start did not say: $(cat "$scratch/log")"

# --detach returns once the daemon serves (its pid on stdout), or with the start's error. The
# start makes the directories above its cache and state directories, as --check-config found
# it could.
pid=$("$kprofd" --detach --listen 127.0.0.1:0 --port-file "$scratch/detached" \
  --cache-dir "$scratch/new/levels/cache/" 2>"$scratch/log") || fail "--detach: $(cat "$scratch/log")"
[ -d "$scratch/new/levels/cache/modules" ] || fail "the cache's missing parents were not made"
[[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" || fail "--detach printed '$pid', not a running pid"
[ -s "$scratch/detached" ] || fail "--detach returned before the port file was written"
grep -q "serving on 127.0.0.1:$(cat "$scratch/detached")" "$scratch/log" || fail "detached log"
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$pid" 2>/dev/null || fail "the detached daemon did not stop on TERM"
if "$kprofd" --detach --listen 127.0.0.1:0 --cache-dir /proc/kprofd 2>"$scratch/err" >"$scratch/out"; then
  fail "a detached start that failed exited 0"
fi
grep -q "cannot create '/proc/kprofd'" "$scratch/err" || fail "detached error: $(cat "$scratch/err")"
[ ! -s "$scratch/out" ] || fail "a failed detach printed a pid"
if NOTIFY_SOCKET=/run/x "$kprofd" --detach --listen 127.0.0.1:0 2>"$scratch/err"; then
  fail "--detach under systemd"
fi
grep -q "detach is for a shell" "$scratch/err" || fail "systemd detach: $(cat "$scratch/err")"
echo "config: 27 passed, 0 failed"

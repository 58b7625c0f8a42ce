#!/usr/bin/env python3
"""The README's commands, run as written and in order, as a newcomer runs them after `make demo`.

Every ```sh block of README.md runs, in one shell (a block's `export` holds for the next), from
the source tree, with `set -e`: a command that fails fails the test, naming its line. A block
this host cannot run is marked on the line before its fence,

    <!-- readme-test: skip: REASON -->

and a block that is a file the commands use (a module's source) is written first:

    <!-- readme-test: file NAME -->

The commands run as root in namespaces of their own, so that they change nothing here: a
network with only its own loopback (the README's port 9177 is free there), and mounts where
/usr/local and the source tree are overlays whose writes go to a scratch directory, and
/var/cache and /etc/kprofd are empty. What they leave behind goes with the namespaces.

Usage: readme_test.py SOURCE_DIR BUILD_DIR. Exit 77 (skipped) when not root, or when BUILD_DIR
is not SOURCE_DIR/build/release, which the README's commands name.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"<!-- readme-test: (?:skip: (?P<reason>\S.*?)|file (?P<file>\S+)) -->")
SKIPPED = 77


def blocks(text):
    """The fenced blocks of `text`: (line of the fence, language, body, marker match or None)."""
    lines = text.split("\n")
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.fullmatch(line.strip())
        if marker is not None or line.lstrip().startswith("<!-- readme-test"):
            if marker is None:
                raise SystemExit(f"README.md:{i + 1}: a readme-test marker not understood: {line}")
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise SystemExit(f"README.md:{i + 1}: a readme-test marker not before a fence")
        if line.startswith("```"):
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                raise SystemExit(f"README.md:{i + 1}: a fence that is never closed")
            before = MARKER.fullmatch(lines[i - 1].strip()) if i > 0 else None
            found.append((i + 1, line[3:].strip(), "\n".join(lines[i + 1:end]), before))
            i = end
        i += 1
    return found


def main():
    source, build = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])
    if os.geteuid() != 0:
        print("skipped: the README's commands install into /usr/local; run as root")
        return SKIPPED
    if build != os.path.join(source, "build", "release"):
        print(f"skipped: the README's commands name build/release, and this tree is {build}")
        return SKIPPED
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        readme = f.read()

    scratch = tempfile.mkdtemp(prefix="kprof-readme-")
    try:
        files, script, ran, skipped = {}, [], [], []
        for line, language, body, marker in blocks(readme):
            if marker is not None and marker.group("file"):
                files[marker.group("file")] = body + "\n"
            elif language == "sh":
                if marker is not None:
                    skipped.append(f"README.md:{line}: {marker.group('reason')}")
                    continue
                ran.append(line)
                script.append(f'echo "### README.md:{line}" >&2\n{body}\n')
        if not ran:
            print("FAILED: no block of README.md to run")
            return 1
        for name, text in files.items():
            with open(os.path.join(scratch, name), "w", encoding="utf-8") as f:
                f.write(text)

        # The commands: from the source tree, its files beside them, as root without sudo if
        # the host has none.
        with open(os.path.join(scratch, "readme.sh"), "w", encoding="utf-8") as f:
            # The daemons the commands start are stopped by TERM, as a newcomer would, so that
            # they remove what they made (their workers' cgroups) rather than die with the
            # namespace.
            f.write("stop() { pkill -TERM -x kprofd || true; for _ in $(seq 100); do "
                    "pgrep -x kprofd >/dev/null || return 0; sleep 0.1; done; }\ntrap stop EXIT\n")
            f.write("set -euo pipefail\nset -x\n")
            f.write(f"cd {source}\n")
            for name in files:
                f.write(f"cp {scratch}/{name} .\n")
            f.write("command -v sudo >/dev/null || sudo() { \"$@\"; }\n")
            f.write("\n".join(script))
            f.write('\necho "### README.md: every block ran" >&2\n')
        # The namespaces' own mounts and network, then the commands.
        setup = f"""set -e
mount --make-rprivate /
ip link set lo up
mkdir -p {scratch}/upper
mount -t tmpfs kprof-readme {scratch}/upper
for lower in /usr/local {source}; do
  name=$(echo "$lower" | tr / _)
  mkdir -p {scratch}/upper/$name/data {scratch}/upper/$name/work
  mount -t overlay kprof-readme \\
    -o lowerdir=$lower,upperdir={scratch}/upper/$name/data,workdir={scratch}/upper/$name/work $lower
done
mount -t tmpfs kprof-readme /var/cache
if [ -d /etc/kprofd ]; then mount -t tmpfs kprof-readme /etc/kprofd; fi
echo "### namespaces ready" >&2
exec bash {scratch}/readme.sh
"""
        if shutil.which("unshare") is None or shutil.which("ip") is None:
            print("FAILED: the README test needs unshare (util-linux) and ip (iproute2); "
                  "deploy/install-deps.sh installs them")
            return 1
        # A newcomer's shell: none of this one's kprof settings.
        env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
        path = env.get("PATH", "").split(":")
        for needed in ("/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
            if needed not in path:
                path.append(needed)
        env["PATH"] = ":".join(path)
        log_path = os.path.join(scratch, "readme.log")
        timed_out = False
        with open(log_path, "w", encoding="utf-8") as log:
            # --kill-child: whatever happens to unshare, the namespace's processes go with it.
            command = subprocess.Popen(
                ["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc", "--kill-child",
                 "bash", "-c", setup], stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                returncode = command.wait(timeout=540)
            except subprocess.TimeoutExpired:
                timed_out = True
                command.terminate()
                try:
                    returncode = command.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    command.kill()
                    returncode = command.wait()
        with open(log_path, encoding="utf-8", errors="replace") as log:
            output = log.read()
        if os.environ.get("KPROF_README_VERBOSE"):
            print(output)
        for line in skipped:
            print("skipped", line)
        if "### namespaces ready" not in output:
            print(output[-12000:])
            print(f"FAILED: the namespaces for the commands could not be set up (exit "
                  f"{returncode}), before any README command ran")
            return 1
        if timed_out or returncode != 0 or "every block ran" not in output:
            at = re.findall(r"### (README\.md:\d+)", output)
            print(output[-12000:])
            print(f"FAILED: the commands of {at[-1] if at else 'README.md'} "
                  + ("ran past 540 s" if timed_out else f"exited {returncode}"))
            return 1
        print(f"README.md: {len(ran)} blocks ran (lines {', '.join(map(str, ran))}), "
              f"{len(skipped)} skipped with their reasons")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

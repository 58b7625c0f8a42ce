#!/bin/sh
# Installs kprofd from this bundle (the directory this script is in) on an arm64 board: the
# files under /opt/kprofd, `kprof` on the PATH, the systemd unit (with the Jetson drop-in on a
# Jetson), an example configuration, and the service started. Run as root, from the unpacked
# bundle; the board's .deb runs it from /opt/kprofd itself (--installed). Nothing outside the
# prefix but the unit, its jetson.conf drop-in, /etc/kprofd/kprofd.conf (made once, never
# replaced) and the /usr/local/bin/kprof link is touched; a directory that is not a kprofd
# bundle is never replaced or removed.
# Usage: install.sh [--prefix DIR] [--no-start] | install.sh --uninstall [--prefix DIR]
set -eu
me=install.sh
here=$(cd "$(dirname "$0")" && pwd)
prefix=/opt/kprofd
start=yes
uninstall=no
installed=no  # run by the package: the files are dpkg's, in place already
usage() {
  echo "usage: $me [--prefix DIR] [--no-start]    install this bundle (default prefix /opt/kprofd)"
  echo "       $me --uninstall [--prefix DIR]     stop the service, remove the unit and the files"
}
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || { echo "$me: --prefix needs a directory" >&2; exit 2; }
              prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --no-start) start=no; shift ;;
    --uninstall) uninstall=yes; shift ;;
    --installed) installed=yes; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$me: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ "$installed" = yes ]; then prefix=$here; fi
# /opt/kprofd/ is /opt/kprofd; / (or //) is no prefix at all.
while [ "${prefix%/}" != "$prefix" ]; do prefix=${prefix%/}; done
case $prefix in
  /?*) ;;
  "") echo "$me: --prefix cannot be / (the bundle needs a directory of its own)" >&2; exit 2 ;;
  *) echo "$me: --prefix must be an absolute path, not '$prefix'" >&2; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
  echo "$me: run as root (sudo $0): it installs a systemd unit and writes $prefix" >&2
  exit 1
fi
systemd=no
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then systemd=yes; fi
unit=/etc/systemd/system/kprofd.service

# Whether `$1` is a kprofd bundle (what this script installs), which alone it may replace.
is_bundle() { [ -f "$1/install.sh" ] && [ -f "$1/bin/kprofd" ]; }
# Whether the kprofd package (dpkg) owns the files at `$1`: then apt, not this script, changes them.
packaged() {
  [ "$installed" = no ] && command -v dpkg-query >/dev/null &&
    dpkg-query -S "$1/install.sh" >/dev/null 2>&1
}
if packaged "$prefix"; then
  echo "$me: $prefix is the kprofd package's: 'apt remove kprofd' removes it, and a newer" \
       ".deb upgrades it" >&2
  exit 1
fi

if [ "$uninstall" = yes ]; then
  if [ -e "$prefix" ] && ! is_bundle "$prefix"; then
    echo "$me: $prefix is not a kprofd bundle (no install.sh and bin/kprofd): left alone" >&2
    exit 1
  fi
  if [ "$systemd" = yes ]; then systemctl disable --now kprofd.service 2>/dev/null || true; fi
  rm -f "$unit" "$unit.d/jetson.conf"
  rmdir "$unit.d" 2>/dev/null || true  # drop-ins of the administrator's own stay
  if [ "$(readlink /usr/local/bin/kprof 2>/dev/null)" = "$prefix/bin/kprof" ]; then
    rm -f /usr/local/bin/kprof
  fi
  if [ "$systemd" = yes ]; then systemctl daemon-reload; fi
  if [ "$installed" = no ]; then
    rm -rf "$prefix"
    echo "$me: kprofd removed ($prefix; /etc/kprofd is left as it was)"
  else
    echo "$me: kprofd's unit removed (the package's files are dpkg's to remove)"
  fi
  exit 0
fi

# What the bundle needs of the board: an arm64 processor, and the C library of Ubuntu 22.04
# (JetPack 6) or newer; the C++ runtime is checked by running kprofd below.
machine=$(uname -m)
if [ "$machine" != aarch64 ]; then
  echo "$me: this bundle is for arm64 (aarch64) boards; this machine is $machine" >&2
  exit 1
fi
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}') || true
if [ -z "$glibc" ]; then  # no getconf (BusyBox): the loader says its release
  glibc=$(/lib/ld-linux-aarch64.so.1 --version 2>/dev/null |
          sed -n 's/.*release version \([0-9.]*[0-9]\).*/\1/p' | head -1) || true
fi
if [ -n "$glibc" ] && [ "$(printf '%s\n2.35\n' "$glibc" | sort -V | head -1)" != 2.35 ]; then
  echo "$me: kprofd needs glibc 2.35 or newer (Ubuntu 22.04: JetPack 6, or later); this system" \
       "has $glibc (JetPack 5 is Ubuntu 20.04)" >&2
  exit 1
fi

if [ "$here" != "$prefix" ]; then
  if [ -e "$prefix" ] && ! is_bundle "$prefix"; then
    echo "$me: $prefix exists and is not a kprofd bundle: choose another --prefix" >&2
    exit 1
  fi
  # Beside the old one first, and run there: a bundle that does not run here replaces nothing.
  mkdir -p "$(dirname "$prefix")"
  rm -rf "$prefix.new"
  cp -a "$here/." "$prefix.new"
  if ! version=$("$prefix.new/bin/kprofd" --version 2>&1); then
    rm -rf "$prefix.new"
    echo "$me: kprofd from this bundle does not run on this system (nothing was changed):" >&2
    echo "$version" >&2
    exit 1
  fi
  rm -rf "$prefix"
  mv "$prefix.new" "$prefix"
fi
if ! version=$("$prefix/bin/kprofd" --version 2>&1); then
  echo "$me: $prefix/bin/kprofd does not run on this system:" >&2
  echo "$version" >&2
  exit 1
fi
mkdir -p /usr/local/bin
ln -sf "$prefix/bin/kprof" /usr/local/bin/kprof
mkdir -p /etc/kprofd
if [ ! -e /etc/kprofd/kprofd.conf ]; then
  cp "$prefix/share/kprofd/kprofd.conf.example" /etc/kprofd/kprofd.conf
fi

# The unit, naming this prefix's kprofd; on a Jetson, the drop-in for its GPU's device nodes.
mkdir -p "$(dirname "$unit")"
sed "s#^ExecStart=.*/bin/kprofd#ExecStart=$prefix/bin/kprofd#" \
  "$prefix/share/kprofd/kprofd.service" >"$unit"
if [ -e /etc/nv_tegra_release ]; then
  mkdir -p "$unit.d"
  cp "$prefix/share/kprofd/jetson.conf" "$unit.d/jetson.conf"
fi
echo "$me: $version installed in $prefix"
if [ "$systemd" = yes ]; then
  systemctl daemon-reload
  if [ "$start" = yes ]; then
    systemctl enable kprofd.service
    if ! systemctl restart kprofd.service; then
      # Installed all the same; what stops it is the configuration's to fix.
      echo "$me: kprofd.service did not start: 'journalctl -u kprofd' says why;" \
           "'$prefix/bin/kprofd --check-config' checks /etc/kprofd/kprofd.conf" >&2
      [ "$installed" = yes ] || exit 1
    else
      echo "$me: kprofd.service started; 'kprof info' asks it what this board has"
    fi
  else
    echo "$me: start it with 'systemctl enable --now kprofd'"
  fi
else
  echo "$me: systemd is not running here: start kprofd with '$prefix/bin/kprofd --detach'"
fi
echo "$me: options are in /etc/kprofd/kprofd.conf (listen address, TLS, tokens)"

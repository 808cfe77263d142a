#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Inside the chroot: put the real udevadm and the ane udev rule into the
# x86_64 test initramfs at ROOT, for tools/qemu/tests/udev.sh (`udevadm
# verify` and `udevadm test` against the bound simulated device's real
# /sys, instead of a model of udev's matching).
#
#   guest-udevadm.sh ROOT
#
# The build chroot has no udev package (no systemd). Installing one would
# change the chroot's package list and so its cache key (a rebuild of the
# chroot and of everything built in it), so this takes Debian's own udev
# and libsystemd-shared packages of exactly the version of the chroot's
# libudev1 (apt-get update into a scratch directory and download, the
# chroot's own apt sources), unpacks them
# once into /cache/udevadm/VERSION, and copies udevadm with every library
# ldd names into ROOT at their paths. ROOT also gets:
# - packaging/common/70-ane.rules where the packages install it
#   (/usr/lib/udev/rules.d), and nothing else in any rules directory, so
#   the test sees only our rule;
# - /etc/passwd and /etc/group with root and a render group (gid 989, a
#   number no default assigns, so the test proves the rule's name was
#   resolved through this file).
set -euo pipefail
root=$1

ver=$(dpkg-query -W -f='${Version}' libudev1)
cache=/cache/udevadm/$ver
if [ ! -x "$cache/usr/bin/udevadm" ]; then
	tmp=$(mktemp -d)
	# A chroot fresh from mmdebstrap has no package lists: they are read
	# into a scratch directory, so the chroot stays what its key says.
	apt=(-q -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o APT::Sandbox::User=root)
	mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
	{ apt-get "${apt[@]}" update >/dev/null &&
		(cd "$tmp" && apt-get "${apt[@]}" download "udev=$ver" "libsystemd-shared=$ver" >/dev/null); } || {
		echo "guest-udevadm: cannot download udev $ver (apt-get update, then download udev libsystemd-shared; offline?)" >&2
		exit 1
	}
	mkdir -p "$cache.new"
	for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$cache.new"; done
	rm -rf "$tmp" "$cache"
	mv "$cache.new" "$cache"
fi

udevadm=$cache/usr/bin/udevadm
shared=$(ls "$cache"/usr/lib/*/systemd/libsystemd-shared-*.so)
install -D -m0755 "$udevadm" "$root/usr/bin/udevadm"
install -D -m0644 "$shared" "$root${shared#"$cache"}"
for f in $(LD_LIBRARY_PATH=$(dirname "$shared") ldd "$udevadm" | grep -o '/[^ ]*'); do
	case $f in "$cache"/*) continue ;; esac
	[ -e "$root$f" ] || install -D -m0644 "$(readlink -f "$f")" "$root$f"
done
install -D -m0644 /src/packaging/common/70-ane.rules "$root/usr/lib/udev/rules.d/70-ane.rules"
mkdir -p "$root/etc/udev/rules.d" "$root/run/udev"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nrender:x:989:\n' >"$root/etc/group"
echo "udevadm $(LD_LIBRARY_PATH=$(dirname "$shared") "$udevadm" --version) (Debian udev $ver) in the initramfs"

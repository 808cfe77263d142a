#!/usr/bin/env bash
# Create (or reuse) the Debian trixie build chroot. Prints its path.
#
# The chroot is complete when it holds a '.ane-ready' stamp; a partial one
# (an interrupted run) is removed and built again.
source "$(dirname "$0")/common.sh"

dir=$(chroot_dir)
if [ -f "$dir/.ane-ready" ]; then
	[ -n "${ANE_CHROOT_QUIET:-}" ] || cache_note hit "${dir##*/}"
	echo "$dir"
	exit 0
fi
with_lock chroot
if [ -f "$dir/.ane-ready" ]; then
	echo "$dir"
	exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
	log "installing mmdebstrap on the host"
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >&2
fi

cache_note build "${dir##*/}"
mirror=$(debian_mirror)
pkgs=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$ANE_TOP/tools/env/packages.txt" | paste -sd, -)
log "building chroot $dir from $mirror (trixie + trixie-backports)"
rm -rf "$dir" "$dir.tmp"
start=$(date +%s)
# The arm64 busybox for the arm64 initramfs cannot be co-installed with the
# amd64 one, so it is unpacked beside the root filesystem instead.
mmdebstrap --variant=apt --architectures=amd64,arm64 \
	--include="$pkgs" \
	--aptopt='APT::Install-Recommends "false"' \
	--customize-hook='chroot "$1" sh -c "cd /tmp && apt-get download busybox-static:arm64 && mkdir -p /opt/arm64-busybox && dpkg-deb -x busybox-static_*_arm64.deb /opt/arm64-busybox && rm busybox-static_*_arm64.deb"' \
	--customize-hook="copy-in $ANE_TOP/tools/env/rust-backports.sh /tmp" \
	--customize-hook='chroot "$1" sh -e /tmp/rust-backports.sh && rm "$1/tmp/rust-backports.sh"' \
	--customize-hook='chroot "$1" dpkg-query -W > "$1/.ane-manifest"' \
	--customize-hook='cat "$1/opt/rust-backports/manifest" >> "$1/.ane-manifest"' \
	"$ANE_SUITE" "$dir.tmp" \
	"deb $mirror $ANE_SUITE main" \
	"deb $mirror $ANE_SUITE-backports main" >&2
mv "$dir.tmp" "$dir"
touch "$dir/.ane-ready"
log "chroot ready in $(($(date +%s) - start)) s: $(chroot "$dir" rustc --version)"
echo "$dir"

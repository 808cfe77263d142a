#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Source archives for the packages, from the working tree.
#
#   tools/packaging/dist.sh OUTDIR [--vendor]
#
# OUTDIR/ane-VERSION.tar.gz: the sources the packages build from (no VCS
# data, no build output). With --vendor also OUTDIR/ane-VERSION-vendor.tar.gz:
# `cargo vendor` of the userspace workspace, so rpmbuild can build offline.
# VERSION is the project's one version (the file VERSION; tools/version.sh
# checks first that every place carries it).
set -euo pipefail
out=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/tools/version.sh" >/dev/null || { echo "dist.sh: the version differs between places (tools/version.sh)" >&2; exit 1; }
version=$(cat "$top/VERSION")
mkdir -p "$out"
tar -C "$top" --exclude-vcs --exclude=./userspace/target --exclude='*.dtbo' \
	--exclude='*.ko' --exclude='*.o' --exclude='.*.cmd' \
	--sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
	--transform "s,^\\.,ane-$version," \
	-czf "$out/ane-$version.tar.gz" \
	./Makefile ./Kbuild ./LICENSE ./README.md ./VERSION ./dkms.conf ./drivers ./include ./dts ./docs ./packaging ./userspace \
	./tools/rustmeta/ane-rust-meta ./tools/rustmeta/README.md
echo "$out/ane-$version.tar.gz"
if [ "${2:-}" = --vendor ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$top/userspace" && cargo vendor --locked --versioned-dirs "$tmp/vendor" >/dev/null 2>"$tmp/vendor.log") ||
		{ cat "$tmp/vendor.log" >&2; exit 1; }
	tar -C "$tmp" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
		-czf "$out/ane-$version-vendor.tar.gz" vendor
	echo "$out/ane-$version-vendor.tar.gz"
fi

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# The project's one version number. VERSION (at the top of the tree) is the
# source of truth; every other place that carries it is written from it:
#
#   tools/version.sh            check: print each place, exit 1 on a mismatch
#   tools/version.sh set X.Y.Z  write X.Y.Z into VERSION and every place
#
# The places: dkms.conf PACKAGE_VERSION; the PKGBUILDs' pkgver (ane-dkms,
# ane-tools, ane-rust-meta); the Fedora spec's Version; the Cargo workspace
# version and the workspace crates' entries in userspace/Cargo.lock; the
# Python crate userspace/ane-py (Cargo.toml, Cargo.lock; the wheel takes its
# version from it); ane-rust-meta's VERSION=; the module's MODULE_VERSION
# (Kbuild reads VERSION; packaging/common/install-dkms-src.sh writes VERSION
# into the DKMS tree).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

ws_crates=$(sed -n 's/^members = \[\(.*\)\]$/\1/p' userspace/Cargo.toml | tr -d '" ' | tr ',' ' ')

# lock_versions LOCKFILE CRATE...: "crate version" of each CRATE in LOCKFILE.
lock_versions() {
	local lock=$1
	shift
	awk -v want=" $* " '
		/^\[\[package\]\]/ { name = "" }
		/^name = / { name = $3; gsub(/"/, "", name) }
		/^version = / && name != "" && index(want, " " name " ") { v = $3; gsub(/"/, "", v); print name, v; name = "" }
	' "$lock"
}

places() {
	echo "VERSION $(cat VERSION)"
	echo "dkms.conf $(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' dkms.conf)"
	local p
	for p in ane-dkms ane-tools ane-rust-meta; do
		echo "packaging/arch/$p/PKGBUILD $(sed -n 's/^pkgver=//p' "packaging/arch/$p/PKGBUILD")"
	done
	echo "packaging/fedora/ane.spec $(sed -n 's/^Version:[[:space:]]*//p' packaging/fedora/ane.spec)"
	echo "userspace/Cargo.toml $(awk '/^\[workspace.package\]/ { p = 1; next } /^\[/ { p = 0 } p && /^version = / { gsub(/"/, "", $3); print $3 }' userspace/Cargo.toml)"
	lock_versions userspace/Cargo.lock $ws_crates | sed 's#^#userspace/Cargo.lock:#'
	echo "userspace/ane-py/Cargo.toml $(sed -n 's/^version = "\(.*\)"$/\1/p' userspace/ane-py/Cargo.toml | head -n1)"
	lock_versions userspace/ane-py/Cargo.lock ane-py $ws_crates | sed 's#^#userspace/ane-py/Cargo.lock:#'
	echo "tools/rustmeta/ane-rust-meta $(sed -n 's/^VERSION=//p' tools/rustmeta/ane-rust-meta)"
}

check() {
	local want rc=0 where v n=0
	want=$(cat VERSION)
	[[ "$want" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "VERSION '$want' is not X.Y.Z" >&2; return 1; }
	while read -r where v; do
		n=$((n + 1))
		if [ "$v" = "$want" ]; then
			echo "ok   $where $v"
		else
			echo "DIFF $where '${v}' (VERSION: $want; run tools/version.sh set $want)" >&2
			rc=1
		fi
	done < <(places)
	# Every workspace crate has a lock entry; the module takes VERSION.
	[ "$(lock_versions userspace/Cargo.lock $ws_crates | wc -l)" = "$(wc -w <<<"$ws_crates")" ] ||
		{ echo "userspace/Cargo.lock lacks a workspace crate ($ws_crates)" >&2; rc=1; }
	grep -q 'MODULE_VERSION(ANE_VERSION)' drivers/accel/ane/ane_glue.c ||
		{ echo "ane_glue.c has no MODULE_VERSION(ANE_VERSION)" >&2; rc=1; }
	grep -q '^ANE_VERSION := .*VERSION' Kbuild || { echo "Kbuild does not read VERSION" >&2; rc=1; }
	echo "$n places"
	return $rc
}

set_version() {
	local v=$1 c
	[[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "usage: tools/version.sh set X.Y.Z" >&2; exit 2; }
	echo "$v" >VERSION
	sed -i "s/^PACKAGE_VERSION=.*/PACKAGE_VERSION=\"$v\"/" dkms.conf
	sed -i "s/^pkgver=.*/pkgver=$v/" packaging/arch/*/PKGBUILD
	sed -i "s/^\(Version:[[:space:]]*\).*/\1$v/" packaging/fedora/ane.spec
	sed -i "/^\[workspace.package\]/,/^\[/ s/^version = \".*\"/version = \"$v\"/" userspace/Cargo.toml
	sed -i "0,/^version = \".*\"/ s/^version = \".*\"/version = \"$v\"/" userspace/ane-py/Cargo.toml
	sed -i "s/^VERSION=.*/VERSION=$v/" tools/rustmeta/ane-rust-meta
	for c in $ws_crates; do
		sed -i "/^name = \"$c\"\$/{n;s/^version = \".*\"/version = \"$v\"/}" userspace/Cargo.lock
	done
	for c in ane-py $ws_crates; do
		sed -i "/^name = \"$c\"\$/{n;s/^version = \".*\"/version = \"$v\"/}" userspace/ane-py/Cargo.lock
	done
	check
}

case "${1:-check}" in
check) check ;;
set) set_version "${2:-}" ;;
*) echo "usage: tools/version.sh [check | set X.Y.Z]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Build the Arch and Fedora packages for real and inspect them.
#
#   tools/packaging/check.sh     (from the repository root, on the host)
#
# Runs itself inside the build chroot (Debian ships makepkg and rpmbuild):
#   - consistency: one version everywhere (VERSION, written by
#     tools/version.sh into dkms.conf, the Cargo workspace and locks, ane-py,
#     PKGBUILDs, spec, ane-rust-meta and the module); the modprobe.d file documents every module parameter
#     with the driver's own default; the udev rule matches the ane accel node
#     and sets group render, mode 0660 and uaccess;
#   - the PKGBUILDs parse (bash -n, makepkg --printsrcinfo) and the -dkms one
#     conflicts with omarchy-ane-dkms;
#   - makepkg, as an unprivileged user that exists for this run only (its
#     passwd entry is bind-mounted in this run's mount namespace), builds
#     ane-dkms and ane-tools (ane-tools with --ignorearch: the chroot is
#     x86_64, the package is aarch64; cargo fetch, then a --frozen build);
#   - rpmbuild builds ane and ane-dkms from the spec (the x86_64 build is
#     allowed by defining ane_arches; Rust crates vendored, offline build);
#   - each package's file list and metadata are what they must be, the DKMS
#     source trees of both formats are identical, and the packaged ane-dt and
#     ane-probe run.
# Ends with "N passed, N failed".
set -euo pipefail

if [ "${ANE_IN_CHROOT:-}" != 1 ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 tools/packaging/check.sh "$@"
fi

cd /src
ANE_STEP_MARK=---
source "$(dirname "${BASH_SOURCE[0]}")/../steps.sh"
fail() { echo "$*" >&2; return 1; }

work=/tmp/ane-pkg
rm -rf "$work"
mkdir -p "$work"
version=$(cat VERSION)

# --- consistency ----------------------------------------------------------------
versions() {
	local v
	tools/version.sh || return 1
	# `set` writes every place: on a copy of the tree, to another version.
	rm -rf "$work/vcopy"
	mkdir -p "$work/vcopy"
	tar -C /src --exclude=./userspace/target --exclude=./.git -cf - . | tar -C "$work/vcopy" -xf -
	"$work/vcopy/tools/version.sh" set 9.8.7 >/dev/null || { "$work/vcopy/tools/version.sh"; return 1; }
	v=$("$work/vcopy/tools/version.sh" | grep -c '^ok .* 9\.8\.7$')
	echo "tools/version.sh set 9.8.7 on a copy: $v places now say 9.8.7, the check passes"
}
step "one version: VERSION in dkms.conf, PKGBUILDs, spec, Cargo workspace and locks, ane-py, ane-rust-meta, module (tools/version.sh; set on a copy)" versions

# Every parameter of the production module, with its default, from the
# driver source (the `params` block up to the test flavour's `$($extra)*`,
# which users never get).
modprobe_doc() {
	local params rc=0 name def
	params=$(awk '/params: \{/ { p = 1 } p && /\$\(\$extra\)\*/ { exit } p' drivers/accel/ane/ane_drv.rs |
		awk '/^[[:space:]]+[a-z_]+: ([iu](8|16|32|64)|bool) \{/ { n = $1; sub(":", "", n) }
			/default:/ && n { d = $2; sub(",", "", d); print n, d; n = "" }')
	[ -n "$params" ] || fail "no module parameters found in ane_drv.rs"
	while read -r name def; do
		if grep -qx "#options ane $name=$def" packaging/common/ane.conf && grep -q "^# $name:" packaging/common/ane.conf; then
			echo "documented: $name (default $def)"
		else
			echo "packaging/common/ane.conf lacks '# $name: ...' and '#options ane $name=$def'" >&2
			rc=1
		fi
	done <<<"$params"
	# No stale option for a parameter the driver no longer has.
	for name in $(sed -n 's/^#options ane \([a-z_]*\)=.*/\1/p' packaging/common/ane.conf); do
		grep -q "^$name " <<<"$params" || { echo "ane.conf documents unknown parameter $name" >&2; rc=1; }
	done
	return $rc
}
step "modprobe.d: every module parameter documented with the driver's default" modprobe_doc

udev_rule() {
	local r
	r=$(grep -v '^#' packaging/common/70-ane.rules | grep .)
	[ "$(wc -l <<<"$r")" = 1 ] || fail "expected one rule, got: $r"
	for want in 'SUBSYSTEM=="accel"' 'KERNEL=="accel[0-9]*"' 'DRIVERS=="ane|ane-fw"' 'GROUP="render"' 'MODE="0660"' 'TAG+="uaccess"'; do
		grep -qF -- "$want" <<<"$r" || fail "70-ane.rules lacks $want"
	done
	# Every key=value pair is well formed (KEY==, KEY=, KEY+= with a quoted value).
	sed 's/, */\n/g' <<<"$r" | grep -vqE '^[A-Z]+(\{[^}]*\})?(==|!=|=|\+=)"[^"]*"$' &&
		fail "malformed udev key in: $r"
	echo "$r"
}
step "udev rule: accel node of driver ane or ane-fw -> render, 0660, uaccess" udev_rule

# --- the build user, for this run only ---------------------------------------------
# makepkg refuses to run as root. The user exists only in this mount
# namespace: copies of passwd/group with it are bind-mounted over the
# chroot's.
builder_uid=1777
setup_builder() {
	cp /etc/passwd "$work/passwd"
	cp /etc/group "$work/group"
	echo "builder:x:$builder_uid:$builder_uid:package builder:$work/home:/bin/bash" >>"$work/passwd"
	echo "builder:x:$builder_uid:" >>"$work/group"
	mount --bind "$work/passwd" /etc/passwd
	mount --bind "$work/group" /etc/group
	# pacman (makepkg lists the installed packages for .BUILDINFO; the checks
	# read the built packages with it) gets an empty database of this run.
	mkdir -p "$work/pacman-db/local"
	sed 's|^#\?DBPath.*|DBPath = '"$work"'/pacman-db/|' /etc/pacman.conf >"$work/pacman.conf"
	mount --bind "$work/pacman.conf" /etc/pacman.conf
	mkdir -p "$work/home"
	# The builder's cargo cache, kept between runs (crates by their checksums).
	mkdir -p /cache/cargo-home-builder
	chown -R "$builder_uid:$builder_uid" "$work" /cache/cargo-home-builder
	id builder
}
step "unprivileged build user for this run" setup_builder
as_builder() {
	runuser -u builder -- env HOME="$work/home" CARGO_HOME=/cache/cargo-home-builder PATH=/usr/bin:/bin "$@"
}

# --- source archives -----------------------------------------------------------
dist() {
	CARGO_HOME=/cache/cargo-home tools/packaging/dist.sh "$work/dist" --vendor
	chown -R "$builder_uid:$builder_uid" "$work/dist"
	ls -l "$work/dist"
	tar -tzf "$work/dist/ane-$version.tar.gz" >"$work/dist.list"
	grep -qx "ane-$version/dkms.conf" "$work/dist.list" || fail "no dkms.conf in the source archive"
	echo "$(wc -l <"$work/dist.list") entries in the source archive"
}
step "source archives (tools/packaging/dist.sh, cargo vendor)" dist

# --- Arch ----------------------------------------------------------------------
arch_parse() {
	local p rc=0
	for p in ane-dkms ane-tools ane-rust-meta; do
		bash -n "packaging/arch/$p/PKGBUILD" || rc=1
		mkdir -p "$work/arch/$p"
		cp "packaging/arch/$p/PKGBUILD" "$work/arch/$p/"
		chown -R "$builder_uid:$builder_uid" "$work/arch"
		(cd "$work/arch/$p" && as_builder makepkg --printsrcinfo >.SRCINFO) || rc=1
		echo "== $p/.SRCINFO"
		cat "$work/arch/$p/.SRCINFO"
	done
	grep -qx $'\tconflicts = omarchy-ane-dkms' "$work/arch/ane-dkms/.SRCINFO" || fail "ane-dkms does not conflict with omarchy-ane-dkms"
	grep -qx $'\tdepends = dkms' "$work/arch/ane-dkms/.SRCINFO" || fail "ane-dkms does not depend on dkms"
	grep -qx $'\tdepends = ane-rust-meta' "$work/arch/ane-dkms/.SRCINFO" || fail "ane-dkms does not depend on ane-rust-meta (its hook must run in the same transaction)"
	grep -qx $'\tarch = any' "$work/arch/ane-dkms/.SRCINFO" || fail "ane-dkms is not arch=any"
	grep -qx $'\tarch = aarch64' "$work/arch/ane-tools/.SRCINFO" || fail "ane-tools is not aarch64"
	grep -qx $'\tarch = any' "$work/arch/ane-rust-meta/.SRCINFO" || fail "ane-rust-meta is not arch=any"
	return $rc
}
step "PKGBUILDs: bash -n, makepkg --printsrcinfo, conflicts/depends/arch" arch_parse

# pkgfile DIR: the one package makepkg produced there.
pkgfile() { ls "$1"/*.pkg.tar.* | grep -v -- '-debug-' | head -n1; }

# has LIST PATH...: every PATH is in the file list LIST.
has() {
	local list=$1 rc=0 p
	shift
	for p in "$@"; do
		grep -qx -- "$p" "$list" || { echo "missing from the package: $p" >&2; rc=1; }
	done
	return $rc
}

makepkg_dkms() {
	local d=$work/arch/ane-dkms pkg
	cp "$work/dist/ane-$version.tar.gz" "$d/"
	chown -R "$builder_uid:$builder_uid" "$d"
	(cd "$d" && as_builder makepkg --nodeps --noconfirm --nocolor) || return 1
	pkg=$(pkgfile "$d")
	echo "built $(basename "$pkg")"
	bsdtar -tf "$pkg" | sed 's#/$##' | sort >"$work/arch-dkms.list"
	bsdtar -xOf "$pkg" .PKGINFO >"$work/arch-dkms.pkginfo"
	# pacman itself reads the package (metadata and file list).
	pacman -Qip "$pkg" | tee "$work/arch-dkms.qip"
	grep -q "^Conflicts With *: omarchy-ane-dkms$" "$work/arch-dkms.qip" || fail "pacman does not see the conflict"
	pacman -Qlp "$pkg" >/dev/null || fail "pacman cannot list the package"
	has "$work/arch-dkms.list" \
		"usr/src/ane-$version/dkms.conf" "usr/src/ane-$version/Makefile" "usr/src/ane-$version/Kbuild" \
		"usr/src/ane-$version/drivers/accel/ane/ane_drv.rs" "usr/src/ane-$version/drivers/accel/ane/ane_glue.c" \
		"usr/src/ane-$version/packaging/dkms/pre-build.sh" "usr/src/ane-$version/VERSION" \
		usr/lib/udev/rules.d/70-ane.rules usr/lib/modprobe.d/ane.conf \
		usr/share/doc/ane/install.md usr/share/licenses/ane-dkms/LICENSE || return 1
	grep -qx "conflict = omarchy-ane-dkms" "$work/arch-dkms.pkginfo" || fail ".PKGINFO lacks the conflict"
	grep -qx "depend = dkms" "$work/arch-dkms.pkginfo" || fail ".PKGINFO lacks depend = dkms"
	bsdtar -xOf "$pkg" "usr/src/ane-$version/dkms.conf" | grep -qx "PACKAGE_VERSION=\"$version\"" ||
		fail "packaged dkms.conf has the wrong version"
	bsdtar -tvf "$pkg" "usr/src/ane-$version/packaging/dkms/pre-build.sh" | grep -q '^-rwxr-xr-x' ||
		fail "pre-build.sh is not executable in the package"
	if grep -E '(^|/)(target|\.git)(/|$)|\.o$|\.ko$' "$work/arch-dkms.list"; then
		fail "build output or VCS data in the package"
	fi
	echo "$(grep -c "^usr/src/ane-$version/" "$work/arch-dkms.list") entries under usr/src/ane-$version"
}
step "makepkg: ane-dkms built, file list and .PKGINFO checked" makepkg_dkms

makepkg_rust_meta() {
	local d=$work/arch/ane-rust-meta pkg
	cp "$work/dist/ane-$version.tar.gz" "$d/"
	chown -R "$builder_uid:$builder_uid" "$d"
	(cd "$d" && as_builder makepkg --nodeps --noconfirm --nocolor) || return 1
	pkg=$(pkgfile "$d")
	echo "built $(basename "$pkg")"
	pacman -Qip "$pkg" | grep -E "^(Name|Version|Architecture|Depends On) "
	bsdtar -tf "$pkg" | sed 's#/$##' | sort >"$work/arch-rust-meta.list"
	has "$work/arch-rust-meta.list" usr/bin/ane-rust-meta usr/share/doc/ane-rust-meta/README.md \
		usr/share/doc/ane-rust-meta/ane-rust-meta.txt usr/share/licenses/ane-rust-meta/LICENSE \
		usr/share/libalpm/hooks/65-ane-rust-meta.hook usr/share/libalpm/hooks/65-ane-rust-meta-remove.hook \
		usr/share/libalpm/scripts/ane-rust-meta-hook || return 1
	mkdir -p "$work/arch-rust-meta-root"
	bsdtar -xf "$pkg" -C "$work/arch-rust-meta-root"
	# The packaged tool is the one the end-to-end test (tools/rustmeta/e2e.sh) runs.
	cmp "$work/arch-rust-meta-root/usr/bin/ane-rust-meta" tools/rustmeta/ane-rust-meta
	# The hooks and their script are the ones tools/rustmeta/hook-check.sh runs
	# with pacman.
	cmp "$work/arch-rust-meta-root/usr/share/libalpm/scripts/ane-rust-meta-hook" packaging/arch/ane-rust-meta/ane-rust-meta-hook
	cmp "$work/arch-rust-meta-root/usr/share/libalpm/hooks/65-ane-rust-meta.hook" packaging/arch/ane-rust-meta/65-ane-rust-meta.hook
	cmp "$work/arch-rust-meta-root/usr/share/libalpm/hooks/65-ane-rust-meta-remove.hook" packaging/arch/ane-rust-meta/65-ane-rust-meta-remove.hook
	bsdtar -tvf "$(pkgfile "$d")" usr/share/libalpm/scripts/ane-rust-meta-hook | grep -q '^-rwxr-xr-x' ||
		fail "the hook script is not executable in the package"
	"$work/arch-rust-meta-root/usr/bin/ane-rust-meta" --version
}
step "makepkg: ane-rust-meta built, file list (tool, pacman hooks, hook script) checked, the tool runs" makepkg_rust_meta

makepkg_tools() {
	local d=$work/arch/ane-tools pkg
	cp "$work/dist/ane-$version.tar.gz" "$d/"
	chown -R "$builder_uid:$builder_uid" "$d"
	(cd "$d" && as_builder makepkg --nodeps --noconfirm --nocolor --ignorearch) || return 1
	pkg=$(pkgfile "$d")
	echo "built $(basename "$pkg")"
	pacman -Qip "$pkg" | grep -E "^(Name|Version|Architecture|Depends On) "
	bsdtar -tf "$pkg" | sed 's#/$##' | sort >"$work/arch-tools.list"
	has "$work/arch-tools.list" usr/bin/ane-probe usr/bin/ane-dt \
		usr/share/ane/dt/t8103-ane.dtbo usr/share/ane/dt/t6000-ane.dtbo usr/share/ane/dt/t6001-ane.dtbo \
		usr/share/ane/dt/t6020-ane.dtbo usr/share/ane/dt/t6021-ane.dtbo \
		usr/share/ane/dt/bindings/apple,t8103-ane.yaml usr/share/licenses/ane-tools/LICENSE || return 1
	mkdir -p "$work/arch-tools-root"
	bsdtar -xf "$pkg" -C "$work/arch-tools-root"
	"$work/arch-tools-root/usr/bin/ane-dt" --version
	"$work/arch-tools-root/usr/bin/ane-probe" --version
	# The packaged overlay is the one the DT check validates.
	dtc -q -I dts -O dtb -o "$work/t8103.dtbo" dts/t8103-ane.dts
	cmp "$work/t8103.dtbo" "$work/arch-tools-root/usr/share/ane/dt/t8103-ane.dtbo"
}
step "makepkg: ane-tools built (cargo fetch + --frozen), binaries run" makepkg_tools

# --- Fedora --------------------------------------------------------------------
rpm_build() {
	local top=$work/rpmbuild
	mkdir -p "$top/SOURCES"
	cp "$work/dist/ane-$version.tar.gz" "$work/dist/ane-$version-vendor.tar.gz" "$top/SOURCES/"
	# --nodeps: the BuildRequires (cargo, rust, dtc) are Debian packages here,
	# unknown to the empty rpm database.
	rpmbuild -ba --nodeps --define "_topdir $top" --define "ane_arches aarch64 x86_64" \
		--define "dist .ane" packaging/fedora/ane.spec >"$work/rpmbuild.log" 2>&1 ||
		{ tail -n 40 "$work/rpmbuild.log"; return 1; }
	tail -n 8 "$work/rpmbuild.log"
	find "$top/RPMS" "$top/SRPMS" -name '*.rpm' | sort
}
step "rpmbuild: ane + ane-dkms from the spec (vendored crates, offline)" rpm_build

rpm_inspect() {
	local top=$work/rpmbuild tools dkms
	tools=$(ls "$top"/RPMS/*/ane-"$version"-*.rpm | grep -v debug | head -n1)
	dkms=$(ls "$top"/RPMS/noarch/ane-dkms-"$version"-*.noarch.rpm)
	rpm -qlp "$tools" | sed 's#^/##' | sort >"$work/rpm-tools.list"
	rpm -qlp "$dkms" | sed 's#^/##' | sort >"$work/rpm-dkms.list"
	has "$work/rpm-tools.list" usr/bin/ane-probe usr/bin/ane-dt usr/share/ane/dt/t6000-ane.dtbo usr/share/ane/dt/t6020-ane.dtbo usr/share/ane/dt/t6021-ane.dtbo || return 1
	has "$work/rpm-dkms.list" "usr/src/ane-$version/dkms.conf" "usr/src/ane-$version/packaging/dkms/pre-build.sh" \
		usr/lib/udev/rules.d/70-ane.rules usr/lib/modprobe.d/ane.conf usr/share/doc/ane/install.md || return 1
	rpm -qp --requires "$dkms" | tee "$work/rpm-dkms.requires"
	grep -qx "dkms" "$work/rpm-dkms.requires" || fail "ane-dkms does not require dkms"
	rpm -qp --conflicts "$dkms" | grep -qx "omarchy-ane-dkms" || fail "ane-dkms (rpm) does not conflict with omarchy-ane-dkms"
	rpm -qp --scripts "$dkms" | tee "$work/rpm-dkms.scripts"
	grep -q "dkms add -m ane -v $version" "$work/rpm-dkms.scripts" && grep -q "dkms remove -m ane -v $version" "$work/rpm-dkms.scripts" ||
		fail "ane-dkms scriptlets do not add/remove the module"
	# Both formats ship the same DKMS source tree.
	diff <(grep "^usr/src/" "$work/arch-dkms.list") <(grep "^usr/src/" "$work/rpm-dkms.list") ||
		fail "the Arch and RPM DKMS trees differ"
	rpm2cpio "$dkms" | (mkdir -p "$work/rpm-dkms-root" && cd "$work/rpm-dkms-root" && cpio -idm --quiet)
	bsdtar -xf "$(pkgfile "$work/arch/ane-dkms")" -C "$work/arch-tools-root" usr/src
	diff -r "$work/rpm-dkms-root/usr/src" "$work/arch-tools-root/usr/src" || fail "DKMS file contents differ"
	echo "ane: $(wc -l <"$work/rpm-tools.list") paths; ane-dkms: $(wc -l <"$work/rpm-dkms.list") paths; DKMS trees identical"
}
step "rpm: file lists, requires, scriptlets; DKMS tree identical to Arch's" rpm_inspect

summary "packaging summary"

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# The pacman hooks of ane-rust-meta, run by a real pacman in a root shaped
# like Arch Linux ARM's, with the network absent.
#
#   tools/rustmeta/hook-check.sh     (from the repository root, on the host)
#
# Runs itself inside the build chroot. There, a copy-on-write view of the
# chroot (overlayfs, upper layer on this run's tmpfs) is the pacman root:
# the chroot itself never changes. Packages are made with bsdtar, as makepkg
# lays them out:
#   - ane-rust-meta 0.1.0: the tool, the hook script and both hooks, at the
#     paths of packaging/arch/ane-rust-meta/PKGBUILD (the packaging check
#     compares the real package against these files);
#   - dkms: a stand-in holding Arch's hook name and trigger
#     (70-dkms-install.hook, PostTransaction on usr/lib/modules/*/build/include/
#     and usr/src/*/dkms.conf), which records that it ran;
#   - linux-asahi-headers 7.1.13.asahi3-1 and 7.1.14.asahi1-1: build trees
#     like the real ones (Makefile, .config with CONFIG_RUST and rustup's
#     rustc text, auto.conf, kernel.release; no rust/).
# Checked, each through pacman -U / -R with no network (an empty network
# namespace; the chroot's curl stand-in really tries):
#   - first install, in the documented order (dkms and the headers there,
#     then ane-rust-meta and ane-dkms in one transaction): pacman parses both
#     hooks without a warning; 65-ane-rust-meta.hook runs for the installed
#     kernel before 70-dkms-install.hook; offline, it says OFFLINE, the
#     kernel, the URL of the exact tag and the commands for later, and the
#     transaction succeeds;
#   - installing a kernel's headers: the same, for that kernel;
#   - with the tag's source in the cache, the hook runs ane-rust-meta on it
#     for that kernel (the test tree and tarball are no real kernel, so the
#     tool refuses them, and the hook says so and still succeeds);
#   - a kernel update (7.1.13 -> 7.1.14): the old kernel's rebuilt metadata
#     (a stamp and files as ane-rust-meta writes them) is removed before
#     pacman removes its headers, so no directory of the old kernel is left,
#     and its cached source goes with it; the new kernel gets the hook;
#   - removing the headers removes the metadata too; so does removing
#     ane-rust-meta itself (for every kernel), leaving the headers' files.
# Ends with "N passed, N failed".
set -euo pipefail

if [ "${ANE_IN_CHROOT:-}" != 1 ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 tools/rustmeta/hook-check.sh "$@"
fi

cd /src
# shellcheck disable=SC2034 # read by tools/steps.sh
ANE_STEP_MARK=---
source tools/steps.sh
fail() { echo "$*" >&2; return 1; }

work=/tmp/ane-hook
root=$work/root
rm -rf "$work"
mkdir -p "$work/upper" "$work/ovl" "$root" "$work/pkgs"
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' dkms.conf)
rel1=7.1.13-3-1-ARCH
rel2=7.1.14-1-1-ARCH

mkroot() {
	mount -t overlay overlay -o "lowerdir=/,upperdir=$work/upper,workdir=$work/ovl" "$root"
	mount -t proc proc "$root/proc"
	mount --rbind /dev "$root/dev"
	mount -t tmpfs tmpfs "$root/tmp"
	# What pacman and the hooks write, empty: its database, the modules
	# tree, the source cache.
	rm -rf "$root/var/lib/pacman" "$root/usr/lib/modules" "$root/var/cache/ane-rust-meta" "$root/usr/share/libalpm"
	mkdir -p "$root/var/lib/pacman" "$root/usr/lib/modules" "$root/var/cache/pacman/pkg"
	cat >"$work/pacman.conf" <<-EOC
	[options]
	Architecture = auto
	SigLevel = Never
	LocalFileSigLevel = Never
	EOC
	# The chroot has no curl (Arch's pacman depends on it): a stand-in that
	# really tries the network, with Python's urllib.
	mkdir -p "$root/usr/local/bin"
	cat >"$root/usr/local/bin/curl" <<-'EOC'
	#!/usr/bin/python3
	# curl -fsSL ... -o FILE URL, for the hook test: a real download attempt.
	import sys, urllib.request
	a = sys.argv[1:]
	out = a[a.index("-o") + 1]
	try:
	    data = urllib.request.urlopen(a[-1], timeout=20).read()
	except Exception as e:
	    sys.stderr.write("curl: (6) %s\n" % e)
	    sys.exit(6)
	open(out, "wb").write(data)
	EOC
	chmod 755 "$root/usr/local/bin/curl"
	echo "pacman root: $root (overlay of the chroot)"
}
step "a root shaped like Arch Linux ARM's (overlay of the chroot, empty pacman database)" mkroot

# mkpkg NAME VERSION DIR: a pacman package of DIR's files.
mkpkg() {
	local name=$1 ver=$2 dir=$3 out
	out=$work/pkgs/$name-$ver-any.pkg.tar.gz
	cat >"$dir/.PKGINFO" <<-EOC
	pkgname = $name
	pkgbase = $name
	pkgver = $ver
	pkgdesc = test package $name
	url = https://example.invalid
	builddate = 0
	packager = ane tests
	size = 1
	arch = any
	license = GPL-2.0-only
	EOC
	(cd "$dir" && LANG=C bsdtar -czf "$out" --uid 0 --gid 0 .PKGINFO $(ls -A | grep -vx .PKGINFO))
	echo "$out"
}
pm() { pacman --config "$work/pacman.conf" --root "$root" --dbpath "$root/var/lib/pacman" \
	--cachedir "$root/var/cache/pacman/pkg" --hookdir "$root/etc/pacman.d/hooks" --noconfirm --color never "$@"; }

# headers_pkg PKGVER RELEASE: linux-asahi-headers as pacman sees it.
headers_pkg() {
	local d=$work/hdr-$2 b
	b=$d/usr/lib/modules/$2/build
	rm -rf "$d"
	mkdir -p "$b/include/config" "$b/rust/kernel"
	printf 'VERSION = 7\nPATCHLEVEL = 1\n' >"$b/Makefile"
	printf 'CONFIG_RUST=y\nCONFIG_RUSTC_VERSION_TEXT="rustc 1.93.1 (01f6ddf75 2026-02-11)"\n' >"$b/.config"
	printf 'CONFIG_RUST=y\n' >"$b/include/config/auto.conf"
	: >"$b/Module.symvers"
	echo "$2" >"$b/include/config/kernel.release"
	# Arch's headers bring this Kconfig copy, and no metadata.
	echo "# test" >"$b/rust/kernel/Kconfig.test"
	mkdir -p "$d/usr/share/doc"
	mkpkg linux-asahi-headers "$1" "$d"
}

packages() {
	local d=$work/p-meta
	mkdir -p "$d/usr/bin" "$d/usr/share/libalpm/hooks" "$d/usr/share/libalpm/scripts"
	# The paths of packaging/arch/ane-rust-meta/PKGBUILD.
	install -m755 tools/rustmeta/ane-rust-meta "$d/usr/bin/ane-rust-meta" || return 1
	install -m755 packaging/arch/ane-rust-meta/ane-rust-meta-hook "$d/usr/share/libalpm/scripts/ane-rust-meta-hook" || return 1
	install -m644 packaging/arch/ane-rust-meta/65-ane-rust-meta.hook packaging/arch/ane-rust-meta/65-ane-rust-meta-remove.hook \
		"$d/usr/share/libalpm/hooks/" || return 1
	mkpkg ane-rust-meta "$version-1" "$d"
	d=$work/p-dkms
	mkdir -p "$d/usr/share/libalpm/hooks"
	# Arch's name and trigger; the action only records that it ran.
	cat >"$d/usr/share/libalpm/hooks/70-dkms-install.hook" <<-'EOC'
	[Trigger]
	Operation = Install
	Operation = Upgrade
	Type = Path
	Target = usr/lib/modules/*/build/include/
	Target = usr/lib/modules/*/modules.alias
	Target = usr/src/*/dkms.conf

	[Action]
	Description = Install DKMS modules
	When = PostTransaction
	Exec = /bin/sh -c 'while read -r t; do echo "dkms install hook: $t"; done'
	NeedsTargets
	EOC
	mkpkg dkms 3.2.2-1 "$d"
	# ane-dkms as dkms's hook sees it (its dkms.conf).
	d=$work/p-ane-dkms
	mkdir -p "$d/usr/src/ane-$version"
	cp dkms.conf "$d/usr/src/ane-$version/"
	mkpkg ane-dkms "$version-1" "$d"
	headers_pkg 7.1.13.asahi3-1 "$rel1"
	headers_pkg 7.1.14.asahi1-1 "$rel2"
}
step "packages: ane-rust-meta (tool, hook script, hooks), dkms's hook, ane-dkms, linux-asahi-headers" packages

# pm_offline LOG ARGS...: pacman with no network (an empty network
# namespace); its output in LOG and shown.
pm_offline() {
	local log=$1 rc=0
	shift
	unshare -n -- pacman --config "$work/pacman.conf" --root "$root" --dbpath "$root/var/lib/pacman" \
		--cachedir "$root/var/cache/pacman/pkg" --noconfirm --color never "$@" >"$log" 2>&1 || rc=$?
	cat "$log"
	[ "$rc" = 0 ] || fail "pacman $* failed ($rc)"
}

# order LOG: the ane-rust-meta hook ran, before dkms's.
order() {
	local a b
	a=$(grep -n "Rebuilding the kernel's Rust metadata" "$1" | head -n1 | cut -d: -f1)
	b=$(grep -n "Install DKMS modules" "$1" | head -n1 | cut -d: -f1)
	[ -n "$a" ] || fail "the ane-rust-meta hook did not run" || return 1
	[ -n "$b" ] || fail "dkms's hook did not run" || return 1
	[ "$a" -lt "$b" ] || fail "dkms's hook ran before the ane-rust-meta hook" || return 1
	echo "hook order: ane-rust-meta (line $a) before dkms (line $b)"
}

# offline_said LOG REL TAG: the hook's offline message for REL.
offline_said() {
	local w
	for w in "$2: OFFLINE? could not download https://github.com/AsahiLinux/linux/archive/refs/tags/$3.tar.gz" \
		"sudo /usr/share/libalpm/scripts/ane-rust-meta-hook install --kernel $2" "--source-tarball /var/cache/ane-rust-meta/$3.tar.gz" \
		"dkms autoinstall -k $2"; do
		grep -qF -- "$w" "$1" || fail "the hook did not say: $w" || return 1
	done
	[ ! -e "$root/var/cache/ane-rust-meta/$3.tar.gz.part" ] || fail "a partial download was left behind" || return 1
}

base() {
	pm -U "$work/pkgs/dkms-3.2.2-1-any.pkg.tar.gz" "$work/pkgs/linux-asahi-headers-7.1.13.asahi3-1-any.pkg.tar.gz"
}
step "pacman -U dkms linux-asahi-headers (7.1.13.asahi3-1): the system before ane" base

first_install() {
	pm_offline "$work/u1.log" -U "$work/pkgs/ane-rust-meta-$version-1-any.pkg.tar.gz" \
		"$work/pkgs/ane-dkms-$version-1-any.pkg.tar.gz" || return 1
	if grep -qi "invalid\|warning" "$work/u1.log"; then
		fail "pacman warned (about the hooks?)" || return 1
	fi
	order "$work/u1.log" || return 1
	grep -q "dkms install hook: usr/src/ane-$version/dkms.conf" "$work/u1.log" || fail "dkms's hook did not see ane-dkms" || return 1
	offline_said "$work/u1.log" "$rel1" asahi-7.1.13-3
}
step "first install, offline: pacman -U ane-rust-meta ane-dkms: both hooks parse, the metadata hook runs for the installed kernel before dkms's, says OFFLINE, the tag's URL and what to run later" first_install

kernel_install() {
	pm -R linux-asahi-headers >/dev/null || return 1
	pm_offline "$work/u2.log" -U "$work/pkgs/linux-asahi-headers-7.1.13.asahi3-1-any.pkg.tar.gz" || return 1
	order "$work/u2.log" || return 1
	offline_said "$work/u2.log" "$rel1" asahi-7.1.13-3
}
step "kernel install, offline: the hook runs before dkms's for the new headers, with the same message" kernel_install

cached_source() {
	local rc=0
	mkdir -p "$work/notsrc/linux-asahi-7.1.13-3"
	echo "not a kernel" >"$work/notsrc/linux-asahi-7.1.13-3/README"
	tar -C "$work/notsrc" -czf "$root/var/cache/ane-rust-meta/asahi-7.1.13-3.tar.gz" linux-asahi-7.1.13-3
	unshare -n -- chroot "$root" /usr/share/libalpm/scripts/ane-rust-meta-hook install --kernel "$rel1" \
		>"$work/h1.log" 2>&1 || rc=$?
	cat "$work/h1.log"
	[ "$rc" = 0 ] || fail "the hook failed ($rc)" || return 1
	for w in "$rel1: source asahi-7.1.13-3 from the cache" \
		"ane-rust-meta --kdir /usr/lib/modules/$rel1/build --accept-toolchain-drift --source-tarball /var/cache/ane-rust-meta/asahi-7.1.13-3.tar.gz" \
		"$rel1: ane-rust-meta refused or failed (exit"; do
		grep -qF -- "$w" "$work/h1.log" || fail "the hook did not say: $w" || return 1
	done
}
step "cached source: the hook runs ane-rust-meta on the cached tag for that kernel, offline (refusal reported, no failure)" cached_source

# fake_rebuilt REL TAG: KDIR/rust as ane-rust-meta leaves it.
fake_rebuilt() {
	local r=$root/usr/lib/modules/$1/build/rust
	mkdir -p "$r"
	echo x >"$r/libkernel.rmeta"
	echo x >"$r/libmacros.so"
	printf 'kernel_release=%s\nsource=%s.tar.gz (sha256 0)\nfiles=libkernel.rmeta libmacros.so\n' "$1" "$2" >"$r/.ane-rust-meta"
}

upgrade() {
	fake_rebuilt "$rel1" asahi-7.1.13-3
	echo x >"$root/var/cache/ane-rust-meta/asahi-7.1.13-3.tar.gz"
	pm_offline "$work/u3.log" -U "$work/pkgs/linux-asahi-headers-7.1.14.asahi1-1-any.pkg.tar.gz" || return 1
	grep -q "Removing the Rust metadata ane-rust-meta built" "$work/u3.log" || fail "the remove hook did not run" || return 1
	[ ! -e "$root/usr/lib/modules/$rel1" ] || { find "$root/usr/lib/modules/$rel1"; fail "the old kernel's directory is left behind"; return 1; }
	[ ! -e "$root/var/cache/ane-rust-meta/asahi-7.1.13-3.tar.gz" ] || fail "the old kernel's cached source is left behind" || return 1
	order "$work/u3.log" || return 1
	offline_said "$work/u3.log" "$rel2" asahi-7.1.14-1 || return 1
	echo "left: $(ls "$root/usr/lib/modules")"
}
step "kernel update 7.1.13 -> 7.1.14: old metadata and cached source removed with the old headers, nothing left; the new kernel gets the hook" upgrade

remove() {
	fake_rebuilt "$rel2" asahi-7.1.14-1
	pm -R linux-asahi-headers 2>&1 | tee "$work/r1.log" || return 1
	[ ! -e "$root/usr/lib/modules/$rel2" ] || { find "$root/usr/lib/modules/$rel2"; fail "the kernel's directory is left behind"; return 1; }
}
step "pacman -R linux-asahi-headers: the rebuilt metadata goes too, nothing left" remove

remove_tool() {
	pm_offline "$work/u4.log" -U "$work/pkgs/linux-asahi-headers-7.1.14.asahi1-1-any.pkg.tar.gz" || return 1
	fake_rebuilt "$rel2" asahi-7.1.14-1
	echo x >"$root/var/cache/ane-rust-meta/asahi-7.1.14-1.tar.gz"
	pm -R ane-dkms ane-rust-meta 2>&1 | tee "$work/r2.log" || return 1
	[ ! -e "$root/usr/lib/modules/$rel2/build/rust/.ane-rust-meta" ] || fail "the stamp is left behind" || return 1
	[ ! -e "$root/usr/lib/modules/$rel2/build/rust/libkernel.rmeta" ] || fail "the metadata is left behind" || return 1
	[ -f "$root/usr/lib/modules/$rel2/build/rust/kernel/Kconfig.test" ] || fail "the headers' own rust/kernel/Kconfig.test was removed" || return 1
	[ ! -e "$root/var/cache/ane-rust-meta/asahi-7.1.14-1.tar.gz" ] || fail "the cached source is left behind" || return 1
	echo "headers' rust/ now: $(cd "$root/usr/lib/modules/$rel2/build/rust" && find . -type f | tr '\n' ' ')"
}
step "pacman -R ane-dkms ane-rust-meta: the metadata and cached sources of every kernel go too, the headers' own files stay" remove_tool

summary "ane-rust-meta hook summary"

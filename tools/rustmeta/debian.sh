#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# ane-rust-meta on a kernel nobody here built: Debian's own prebuilt amd64
# 7.3 kernel from trixie-backports (issue 24, item 3).
#
#   tools/rustmeta/debian.sh      (from the repository root, on the host)
#
# Runs itself inside the build chroot. Checked, in order:
#   - the newest linux-headers-7.3.*+deb13-amd64 of trixie-backports is
#     resolved, and its headers, headers-common, kbuild, unsigned kernel
#     image and linux-source-7.3 must all be of that exact version (the
#     chroot's installed linux-source-7.3 is used when it is); the .debs are
#     cached under /cache, keyed by the exact package versions;
#   - they are installed, in this run's mount namespace only (overlays over
#     /usr/src and /usr/lib whose writes go to tmpfs), where Debian puts
#     them, so the headers' absolute symlinks resolve;
#   - without rust/ metadata a Rust module does not build against them;
#   - ane-rust-meta rebuilds rust/ from Debian's linux-source with the rustc
#     that built the kernel (1.85.1, the chroot's), verifies it (rustc,
#     source files, configuration, Module.symvers, vmlinux sizes) and
#     installs it into the headers; its work directory is kept under /cache,
#     so a second run is incremental;
#   - the tool's sample Rust module builds against Debian's headers;
#     make kdir-check refuses the ane driver itself, naming CONFIG_DRM=y
#     (Debian builds DRM as a module; the kernel crate's DRM API needs =y);
#   - Debian's own vmlinuz boots in QEMU and loads the sample (it runs);
#     in the guest, every symbol the regenerated crates export is in
#     /proc/kallsyms;
#   - refusals: ane-rust-meta with trixie-backports' rustc (exit 1, both
#     versions named); the sample built by that rustc against the 1.85.1
#     metadata does not build, and that rustc rejects the kernel crate
#     (E0514) where rustc 1.85.1 reads it; a copy in headers-common that
#     differs from the source is named (exit 1), before any build.
# Not done: loading a module built against another kernel's metadata (the
# cache holds no x86_64 7.3 test kernel; the arm64 one cannot load here).
# Every step prints its seconds. Ends with "N passed, N failed".
set -euo pipefail

if [ "${ANE_IN_CHROOT:-}" != 1 ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 tools/rustmeta/debian.sh "$@"
fi

cd /src
# shellcheck disable=SC2034 # read by tools/steps.sh
ANE_STEP_MARK=---
source tools/steps.sh
t_start=$(date +%s)

series=7.3
flavour=amd64
tool=/src/tools/rustmeta/ane-rust-meta
work=/tmp/debian
rm -rf "$work"
mkdir -p "$work/tmp"
export TMPDIR=$work/tmp
# Filled in by the first step.
ver= abi= krel= cache= kdir= src=

# ----------------------------------------------------------------------
# apt_backports: apt's lists of trixie-backports only (the chroot's own are
# empty), on tmpfs in this namespace.
apt_backports() {
	local uri
	uri=$(grep -h '^deb .* trixie-backports' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '{ print $2; exit }')
	[ -n "$uri" ] || { echo "the chroot's apt sources name no trixie-backports" >&2; return 1; }
	mount -t tmpfs tmpfs /var/lib/apt/lists
	echo "deb $uri trixie-backports main" >"$work/backports.list"
	aptopt=(-o Dir::Etc::SourceList="$work/backports.list" -o Dir::Etc::SourceParts=/dev/null
		-o APT::Sandbox::User=root)
	apt-get "${aptopt[@]}" update -qq
}
# candidate PKG: the version of PKG in trixie-backports, or empty.
candidate() { apt-cache "${aptopt[@]}" show --no-all-versions "$1" 2>/dev/null | sed -n 's/^Version: //p' | head -n1; }

fetch_debs() {
	local t0 pkgs p v srcinst key d
	t0=$(date +%s)
	apt_backports || return 1
	# The newest ABI of the series with an amd64 headers package.
	p=$(apt-cache "${aptopt[@]}" pkgnames "linux-headers-$series." |
		grep -E "^linux-headers-$series\.[0-9]+\+deb13-$flavour\$" | sort -V | tail -n1)
	[ -n "$p" ] || { echo "trixie-backports has no linux-headers-$series.*+deb13-$flavour" >&2; return 1; }
	abi=${p#linux-headers-}
	abi=${abi%-"$flavour"}
	ver=$(candidate "$p")
	krel=$abi-$flavour
	echo "newest: $p $ver (kernel release $krel)"
	pkgs=("linux-headers-$abi-$flavour" "linux-headers-$abi-common" "linux-kbuild-$abi"
		"linux-binary-unsigned-$abi-$flavour")
	# The source: the chroot's when it is this very version, else downloaded.
	srcinst=$(dpkg-query -W -f '${Version}' "linux-source-$series" 2>/dev/null || true)
	if [ "$srcinst" = "$ver" ]; then
		echo "linux-source-$series $ver: the chroot's (/usr/src/linux-source-$series.tar.xz)"
	else
		echo "linux-source-$series: the chroot has '${srcinst:-none}', not $ver: downloading it"
		pkgs+=("linux-source-$series")
	fi
	for p in "${pkgs[@]}"; do
		v=$(candidate "$p")
		[ "$v" = "$ver" ] || {
			echo "cannot match versions: $p is '${v:-absent}' in trixie-backports, linux-headers-$abi-$flavour is $ver" >&2
			return 1
		}
	done
	# The key: every package and its exact version, the source's included.
	key=$(printf '%s\n' "${pkgs[@]/%/=$ver}" "linux-source-$series=$ver" | sha256sum | cut -c1-16)
	cache=/cache/debian-kernel-$krel-$key
	if [ -f "$cache/.ane-ready" ]; then
		echo "cache hit: $cache"
	else
		echo "cache build: $cache"
		rm -rf "$cache" "$cache.tmp"
		mkdir -p "$cache.tmp/debs" "$cache.tmp/root"
		(cd "$cache.tmp/debs" && apt-get "${aptopt[@]}" download -q "${pkgs[@]/%/=$ver}") || return 1
		for d in "$cache.tmp"/debs/*.deb; do
			dpkg-deb -x "$d" "$cache.tmp/root"
		done
		printf '%s\n' "${pkgs[@]/%/=$ver}" >"$cache.tmp/packages"
		touch "$cache.tmp/.ane-ready"
		mv "$cache.tmp" "$cache"
	fi
	ls "$cache/debs"
	echo "packages: $(($(date +%s) - t0)) s"
}
step "Debian packages: resolve the newest $series amd64 kernel in trixie-backports, download (cached)" fetch_debs

# ----------------------------------------------------------------------
# Installed where Debian installs them, in this mount namespace only: the
# unpacked packages are the upper lower layer of an overlay over /usr/src and
# /usr/lib (the chroot's own below), writes go to tmpfs.
install_pkgs() {
	local d up
	[ -f "$cache/.ane-ready" ] || { echo "no packages (previous step)" >&2; return 1; }
	for d in /usr/src /usr/lib; do
		up=$work/overlay$d
		mkdir -p "$up/upper" "$up/work"
		mount -t overlay overlay -o "lowerdir=$cache/root$d:$d,upperdir=$up/upper,workdir=$up/work" "$d" || return 1
	done
	kdir=/usr/lib/modules/$krel/build
	ls -l "$kdir" "$kdir/" | sed 's/^/    /'
	# Every symlink of the headers resolves.
	local bad
	bad=$(find "/usr/src/linux-headers-$krel" /usr/lib/modules/"$krel" -maxdepth 1 -type l ! -exec test -e {} \; -print)
	[ -z "$bad" ] || { echo "dangling: $bad" >&2; return 1; }
	[ -f "$kdir/.config" ] && [ -f "$kdir/Module.symvers" ] && [ -f "$kdir/vmlinux" ] &&
		[ -f "$kdir/scripts/Makefile.build" ] || { echo "the headers tree is incomplete" >&2; return 1; }
	grep -E '^CONFIG_(RUST|DRM|DRM_ACCEL|MODULE_SIG|MODULE_SIG_FORCE|RUSTC_VERSION_TEXT|CC_VERSION_TEXT)=' "$kdir/.config" | sed 's/^/    /'
	if compgen -G "$kdir/rust/*.rmeta" >/dev/null; then echo "the headers ship Rust metadata after all" >&2; return 1; fi
	echo "no rust/ metadata in Debian's headers"
}
step "Debian packages installed (overlay over /usr/src, /usr/lib in this namespace)" install_pkgs

# The source: the chroot's linux-source-7.3 unpacked once per version under
# /cache, shared with tools/kernel/build.sh (which names and locks it so).
source_tree() {
	local tarball=/usr/src/linux-source-$series.tar.xz
	src=/cache/linux-src-$ver
	[ -f "$tarball" ] || { echo "no $tarball" >&2; return 1; }
	(
		flock 9
		if [ ! -f "$src/.ane-ready" ]; then
			echo "unpacking $tarball"
			rm -rf "$src" "$src.tmp"
			mkdir -p "$src.tmp"
			tar -C "$src.tmp" --strip-components=1 -xJf "$tarball"
			touch "$src.tmp/.ane-ready"
			mv "$src.tmp" "$src"
		else
			echo "cache hit: $src"
		fi
	) 9>"/cache/.lock-src-$series" || return 1
	# Debian's patched tree: its top Makefile reads the headers'
	# .kernelvariables (a Debian patch).
	grep -q 'kernelvariables' "$src/Makefile" || { echo "$src is not Debian's patched source" >&2; return 1; }
	echo "source: $src (Debian's patched linux-source-$series $ver)"
}
step "Debian's linux-source-$series $ver (unpacked once, cached)" source_tree

# build_sample OUT [MAKEVAR=...]: the sample module, out of tree against
# Debian's headers, as a Debian user builds one (Debian's Makefile takes the
# compiler from .kernelvariables; rustc from PATH).
build_sample() {
	local out=$1
	shift
	rm -rf "$out"
	mkdir -p "$out"
	cp /src/tools/rustmeta/sample/* "$out/"
	make -C "$kdir" M="$out" "$@" modules
}

no_rust() {
	local rc=0
	[ ! -e "$kdir/rust/libkernel.rmeta" ] || { echo "metadata already installed" >&2; return 1; }
	build_sample "$work/sample-before" >"$work/sample-before.log" 2>&1 || rc=$?
	grep -E "error|\*\*\*" "$work/sample-before.log" | head -n 5
	[ "$rc" != 0 ] && [ ! -f "$work/sample-before/ane_rust_meta_sample.ko" ] ||
		{ echo "the sample module built without rust/ metadata" >&2; return 1; }
	grep -qE "can't find crate for|target.json" "$work/sample-before.log" ||
		{ echo "the sample build failed, but not for want of the kernel crate" >&2; return 1; }
}
step "Debian's headers as shipped: a Rust module does not build" no_rust

meta_work() { echo "$cache-meta"; }
regenerate() {
	local rc=0 t0
	t0=$(date +%s)
	"$tool" --kdir "$kdir" --source "$src" --rustc /usr/bin/rustc --workdir "$(meta_work)" \
		>"$work/regen.log" 2>&1 || rc=$?
	cat "$work/regen.log"
	echo "ane-rust-meta: exit status $rc in $(($(date +%s) - t0)) s; work directory $(du -sh "$(meta_work)" | cut -f1)"
	[ "$rc" = 0 ] || return 1
	# Every check it makes ran, and on what.
	grep -qE "source: the [1-9][0-9]{3,} files the headers carry copies of " "$work/regen.log" &&
		grep -qF "copies of (in /usr/src/linux-headers-$abi-common) are identical" "$work/regen.log" &&
		grep -q "configuration: olddefconfig changed nothing; equal to the kernel's include/config/auto.conf" "$work/regen.log" &&
		grep -qE "verification: Module.symvers: ([0-9]+)/\1 matched .*kernel ([0-9]+)/\2\), 0 extra" "$work/regen.log" ||
		{ echo "a check line is missing or incomplete" >&2; return 1; }
	# Debian's vmlinux is BTF only: the size comparison cannot run (said so);
	# the guest's /proc/kallsyms is checked below instead.
	grep -q "verification: not checked (KDIR/vmlinux has a symbol table, but none" "$work/regen.log" ||
		{ echo "expected the size check to report itself as not run" >&2; return 1; }
	[ -f "$kdir/rust/libkernel.rmeta" ] && [ -f "$kdir/scripts/target.json" ] || { echo "not installed" >&2; return 1; }
	grep -E '^(rustc|verified_.*|kdir_files)=' "$kdir/rust/.ane-rust-meta" | sed 's/^/    stamp: /'
}
step "ane-rust-meta: rebuild Debian's rust/ metadata, verify, install" regenerate

sample() {
	local ko=$work/sample/ane_rust_meta_sample.ko n
	build_sample "$work/sample" >"$work/sample.log" 2>&1 || { tail -n 30 "$work/sample.log"; return 1; }
	modinfo "$ko" | grep -E '^(name|vermagic|license):'
	# It links against the kernel's Rust crates by their hashed names.
	n=$(nm -u "$ko" | grep -cE '_(6kernel|4core)' || true)
	echo "$n undefined kernel/core crate symbols"
	[ "$n" -gt 0 ] || return 1
	modinfo -F vermagic "$ko" | grep -q "^$krel " || { echo "vermagic is not $krel" >&2; return 1; }
}
step "the sample Rust module builds against Debian's headers (rustc 1.85.1)" sample

kdir_check() {
	local rc=0
	make -s -C /src kdir-check KDIR="$kdir" >"$work/kdir-check.log" 2>&1 || rc=$?
	cat "$work/kdir-check.log"
	[ "$rc" != 0 ] || { echo "make kdir-check accepted Debian's kernel (CONFIG_DRM=m)" >&2; return 1; }
	grep -q "lacks CONFIG_DRM=y: the kernel crate only offers DRM when DRM is built in" "$work/kdir-check.log" ||
		{ echo "the refusal does not name CONFIG_DRM=y" >&2; return 1; }
	# Refused for the configuration only: the metadata is there now.
	! grep -q "lacks rust/" "$work/kdir-check.log" || { echo "refused for missing metadata" >&2; return 1; }
	echo "refused as it must be (exit status $rc): Debian builds DRM as a module"
}
step "make kdir-check refuses the ane driver for Debian's kernel, naming CONFIG_DRM=y" kdir_check

# ----------------------------------------------------------------------
# The refusals: the step can fail.
other_rustc() {
	local rc=0 other=/opt/rust-backports/bin/rustc have want
	[ -x "$other" ] || { echo "no $other in the chroot" >&2; return 1; }
	have=$("$other" --version)
	want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\(.*\)"$/\1/p' "$kdir/.config")
	"$tool" --kdir "$kdir" --source "$src" --rustc "$other" --workdir "$work/meta-other" --dry-run \
		>"$work/other-rustc.log" 2>&1 || rc=$?
	sed 's/^/    | /' "$work/other-rustc.log"
	[ "$rc" = 1 ] || { echo "exit status $rc, wanted 1" >&2; return 1; }
	grep -qF "rustc mismatch" "$work/other-rustc.log" && grep -qF "\"$want\"" "$work/other-rustc.log" &&
		grep -qF "\"$have\"" "$work/other-rustc.log" ||
		{ echo "the refusal does not name both rustc versions" >&2; return 1; }
	echo "exit status 1 as wanted"
}
step "refused: ane-rust-meta with trixie-backports' rustc (exit 1, both versions named)" other_rustc

other_rustc_module() {
	local rc=0 other=/opt/rust-backports/bin/rustc
	build_sample "$work/sample-other" RUSTC="$other" >"$work/sample-other.log" 2>&1 || rc=$?
	grep -E "^error" "$work/sample-other.log" | sort | uniq -c | head -n 5
	[ "$rc" != 0 ] && [ ! -f "$work/sample-other/ane_rust_meta_sample.ko" ] ||
		{ echo "the sample built with $("$other" --version) against 1.85.1 metadata" >&2; return 1; }
	# Kbuild passes flags chosen for the kernel's rustc (1.85.1: -Zno-jump-tables),
	# so another rustc may stop before it reads the metadata. Reading it,
	# trixie-backports' rustc rejects the kernel crate all the same:
	local t=$work/other-rustc-extern
	mkdir -p "$t"
	echo 'extern crate kernel;' >"$t/t.rs"
	rc=0
	"$other" --edition 2021 --crate-type lib --emit metadata -o "$t/t.rmeta" \
		--extern "kernel=$kdir/rust/libkernel.rmeta" "$t/t.rs" >"$t/log" 2>&1 || rc=$?
	grep -E "^error" "$t/log" | head -n 3
	[ "$rc" != 0 ] && grep -q "incompatible version of rustc" "$t/log" ||
		{ echo "$other read the 1.85.1 kernel crate without an 'incompatible version of rustc' error" >&2; cat "$t/log" >&2; return 1; }
	# The control: the kernel's own rustc reads it past the version check.
	rc=0
	/usr/bin/rustc --edition 2021 --crate-type lib --emit metadata -o "$t/t.rmeta" \
		--extern "kernel=$kdir/rust/libkernel.rmeta" "$t/t.rs" >"$t/log-same" 2>&1 || rc=$?
	! grep -q "incompatible version of rustc" "$t/log-same" ||
		{ echo "even rustc 1.85.1 calls the metadata incompatible" >&2; return 1; }
	echo "rustc 1.85.1 reads the kernel crate past the version check ($(grep -m1 -E '^error' "$t/log-same" || echo 'no error'))"
}
step "refused: the sample built by trixie-backports' rustc against the 1.85.1 metadata" other_rustc_module

other_source() {
	local f=include/linux/kernel.h common=/usr/src/linux-headers-$abi-common rc=0
	# The common package's copy of one header differs (written to this run's
	# overlay only): another patch set than the headers'.
	cp -p "$common/$f" "$work/kernel.h.orig"
	echo '/* another patch set */' >>"$common/$f"
	"$tool" --kdir "$kdir" --source "$src" --rustc /usr/bin/rustc --workdir "$work/meta-source" --dry-run \
		>"$work/other-source.log" 2>&1 || rc=$?
	cp -p "$work/kernel.h.orig" "$common/$f"
	sed 's/^/    | /' "$work/other-source.log" | tail -n 6
	[ "$rc" = 1 ] || { echo "exit status $rc, wanted 1" >&2; return 1; }
	grep -qF "source mismatch: 1 of the" "$work/other-source.log" && grep -qxF "    $f" "$work/other-source.log" &&
		grep -qF "not the source the kernel was built from" "$work/other-source.log" ||
		{ echo "the refusal does not name $f" >&2; return 1; }
	! grep -q "make prepare" "$work/other-source.log" || { echo "it built before refusing" >&2; return 1; }
	echo "exit status 1 as wanted"
}
step "refused: a headers-common copy differing from Debian's source, file named (exit 1)" other_source

# ----------------------------------------------------------------------
# Debian's own kernel image boots with an initramfs of ours: busybox,
# tools/qemu/init.sh, the sample module, and the list of the symbols the
# rebuilt crates export (from the tool's build: rust/exports_*_generated.h).
initramfs() {
	local root=$work/initramfs h
	rm -rf "$root"
	mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,tests} "$root/lib/modules/$krel/extra"
	cp /bin/busybox "$root/bin/busybox"
	cp /src/tools/qemu/init.sh "$root/init"
	chmod +x "$root/init"
	cp /src/tools/qemu/tests/lib.sh /src/tools/rustmeta/guest/rustmeta_sample.sh \
		/src/tools/rustmeta/guest/rustmeta_kallsyms.sh "$root/tests/"
	cp "$work/sample/ane_rust_meta_sample.ko" "$root/lib/modules/$krel/extra/" || return 1
	for h in "$(meta_work)"/obj/rust/exports_*_generated.h; do
		sed -n 's/^EXPORT_SYMBOL_RUST_GPL(\(.*\));$/\1/p' "$h"
	done | LC_ALL=C sort -u >"$root/tests/rust-exports.txt"
	echo "$(wc -l <"$root/tests/rust-exports.txt") exported symbols to look up in the guest"
	[ -s "$root/tests/rust-exports.txt" ] || return 1
	depmod -b "$root" "$krel"
	(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$work/initramfs.cpio.gz"
	ls -l "$work/initramfs.cpio.gz"
}
step "initramfs: busybox, the sample module, the exported-symbol list" initramfs

boot() {
	local b=$work/boot tests=rustmeta_sample,rustmeta_kallsyms
	# tools/qemu/boot.sh boots KDIR/arch/x86/boot/bzImage: here Debian's image.
	mkdir -p "$b/arch/x86/boot"
	ln -sfn "/usr/lib/modules/$krel/vmlinuz.unsigned" "$b/arch/x86/boot/bzImage"
	file -L "$b/arch/x86/boot/bzImage"
	ANE_QEMU_TIMEOUT=${ANE_QEMU_TIMEOUT:-300} tools/qemu/boot.sh x86_64 "$b" "$work/initramfs.cpio.gz" "$tests" "$work/qemu.log" || {
		tail -n 30 "$work/qemu.log"
		return 1
	}
	grep -E '^ANE-BOOTED|ane_rust_meta_sample: |^kallsyms: |Linux version' "$work/qemu.log" | sed 's/^/    /'
	grep -q "^ANE-BOOTED $krel x86_64" "$work/qemu.log" || { echo "not Debian's kernel $krel" >&2; return 1; }
}
step "qemu x86_64: Debian's own vmlinuz loads the sample (it runs); exported symbols all in /proc/kallsyms" boot

# Its own installation again (incremental: seconds), then --remove: what it
# put into rust/ and the kbuild package's scripts/target.json go, nothing else.
rerun_remove() {
	local rc=0 before
	"$tool" --kdir "$kdir" --source "$src" --rustc /usr/bin/rustc --workdir "$(meta_work)" \
		>"$work/rerun.log" 2>&1 || rc=$?
	grep -E "target.json|installed into|exit" "$work/rerun.log" | sed 's/^/    | /'
	[ "$rc" = 0 ] || { cat "$work/rerun.log"; return 1; }
	grep -q "kdir_files=scripts/target.json" "$kdir/rust/.ane-rust-meta" || { echo "target.json not in the stamp" >&2; return 1; }
	before=$(find /usr/lib/linux-kbuild-"$abi" "/usr/src/linux-headers-$abi-common" | wc -l)
	"$tool" --remove --kdir "$kdir" || return 1
	[ ! -e "$kdir/scripts/target.json" ] && [ ! -e "$kdir/rust" ] ||
		{ echo "--remove left files behind" >&2; ls -la "$kdir/rust" "$kdir/scripts/target.json" >&2; return 1; }
	[ "$(find /usr/lib/linux-kbuild-"$abi" "/usr/src/linux-headers-$abi-common" | wc -l)" = $((before - 1)) ] ||
		{ echo "--remove removed more than target.json from the kbuild/common packages" >&2; return 1; }
	echo "rust/ and scripts/target.json removed; the packages' files kept"
}
step "ane-rust-meta again over its own installation, then --remove (target.json too)" rerun_remove

echo
echo "debian duration: $(($(date +%s) - t_start)) s (inside the chroot)"
summary "ane-rust-meta on Debian's kernel: summary"

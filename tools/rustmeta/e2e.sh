#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# End-to-end test of ane-rust-meta against the cached arm64 7.3 test kernel.
#
#   tools/rustmeta/e2e.sh          (from the repository root, on the host)
#
# Runs itself inside the build chroot; everything it writes is under /tmp
# there (the run's private tmpfs). Checked:
#   - a headers tree made as Arch's _package-headers makes linux-asahi-headers
#     (Makefile, .config, Module.symvers, System.map, vmlinux without debug
#     information, include/, arch/arm64 include and Makefile, asm-offsets.s,
#     scripts/, every Kconfig* -- which brings rust/kernel/Kconfig.test --
#     and no Rust metadata) cannot build a Rust module: the sample module
#     fails, make kdir-check names rust/libkernel.rmeta;
#   - refusals, each with its message and exit status 1, KDIR/rust left as it
#     was: another rustc (the .config naming another one; a real other rustc
#     when the chroot has one), an edited .config (source from the
#     distribution's tarball: --source-tarball), a source whose headers
#     differ;
#   - ane-rust-meta rebuilds rust/ from the kernel's source with the kernel's
#     .config and rustc, verifies every exported name against Module.symvers
#     and System.map (standing in for /proc/kallsyms) and every size against
#     vmlinux, and installs it with its stamp;
#   - a kernel whose exported Rust symbols differ (another crate hash in its
#     Module.symvers) is refused with the match counts, exit status 1;
#   - a second run replaces its own installation; metadata it did not
#     install is refused (exit 2) without --force, before any build;
#   - --remove removes only what it installed; --dry-run installs nothing;
#   - C-toolchain version strings differing from the kernel's records are
#     refused and named, and accepted with --accept-toolchain-drift;
#   - the sample Rust module (tools/rustmeta/sample) and the test-flavour
#     ane.ko build against the headers tree;
#   - the ORIGINAL kernel image boots in QEMU and loads both: the sample
#     runs, and ane binds a simulated T8103 (/dev/accel/accel0 appears).
# The runs after the first full one reuse its work directory (incremental), so
# only one rust/ build happens (about 2 minutes on 2 cores).
# Ends with "N passed, N failed".
set -euo pipefail

if [ "${ANE_IN_CHROOT:-}" != 1 ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	ka=$("$top/tools/kernel/build.sh" arm64 7.3)
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 ANE_KDIR="$ka" \
		tools/rustmeta/e2e.sh "$@"
fi

cd /src
# shellcheck disable=SC2034 # read by tools/steps.sh
ANE_STEP_MARK=---
source tools/steps.sh
t_start=$(date +%s)

kdir=$ANE_KDIR
src=$(readlink -f "$kdir/source")
krel=$(cat "$kdir/include/config/kernel.release")
karch=arm64
cross=aarch64-linux-gnu-
kvars=("ARCH=$karch" "CROSS_COMPILE=$cross")
work=/tmp/rustmeta
headers=$work/headers
tool=/src/tools/rustmeta/ane-rust-meta
rm -rf "$work"
mkdir -p "$work/tmp"
# The tool's own temporary work directories, on this run's tmpfs too.
export TMPDIR=$work/tmp
# Every build against the kernel uses the rustc that built it.
withtc() { /src/tools/kernel/with-toolchain.sh "$kdir" "$@"; }
rustc_text=$(withtc rustc --version)
echo "kernel $krel ($kdir), source $src, $rustc_text"

# ----------------------------------------------------------------------
# The headers tree, as Arch's _package-headers builds it from an in-tree
# build (here: the source tree and the O= build directory merged), without
# rust/: what linux-asahi-headers ships.
mk_headers() {
	local s=$src o=$kdir d=$headers
	mkdir -p "$d/kernel" "$d/arch/$karch/kernel"
	cp "$s/Makefile" "$d/"
	cp "$o/.config" "$o/Module.symvers" "$o/System.map" "$d/"
	# Arch strips vmlinux's debug information but keeps its symbols.
	"${cross}strip" --strip-debug -o "$d/vmlinux" "$o/vmlinux"
	cp "$s/kernel/Makefile" "$d/kernel/"
	cp "$s/arch/$karch/Makefile" "$d/arch/$karch/"
	cp -a "$s/scripts" "$d/"
	cp -a "$o/scripts/." "$d/scripts/"
	for t in tools/objtool/objtool tools/bpf/resolve_btfids/resolve_btfids; do
		[ ! -x "$o/$t" ] || install -D "$o/$t" "$d/$t"
	done
	cp -a "$s/include" "$d/"
	cp -a "$o/include/." "$d/include/"
	cp -a "$s/arch/$karch/include" "$d/arch/$karch/"
	cp -a "$o/arch/$karch/include/." "$d/arch/$karch/include/"
	cp "$o/arch/$karch/kernel/asm-offsets.s" "$d/arch/$karch/kernel/"
	(cd "$s" && find . -name 'Kconfig*' -type f -print0 | tar --null -T - -cf -) | tar -C "$d" -xf -
	find "$d" -type f -name '*.o' -delete
	find -L "$d" -type l -delete
	# The test kernels record their rustc here (tools/kernel/with-toolchain.sh).
	cp "$o/.ane-toolchain" "$d/"
	# Like Arch's, it has a rust/ directory all the same: the Kconfig copy
	# brings rust/kernel/Kconfig.test. No metadata.
	echo "headers rust/: $(cd "$d" && find rust -type f 2>/dev/null | tr '\n' ' ')"
	! compgen -G "$d/rust/*.rmeta" >/dev/null && ! compgen -G "$d/rust/*.so" >/dev/null
	du -sh "$d" | sed 's/^/headers tree: /'
}
step "headers tree like linux-asahi-headers (no rust/)" mk_headers

# build_sample KDIR OUT: the sample module, built out of tree against KDIR.
build_sample() {
	rm -rf "$2"
	mkdir -p "$2"
	cp /src/tools/rustmeta/sample/* "$2/"
	withtc make -C "$1" M="$2" "${kvars[@]}" modules
}

no_rust() {
	local rc=0
	build_sample "$headers" "$work/sample-before" >"$work/sample-before.log" 2>&1 || rc=$?
	grep -E "error|\*\*\*" "$work/sample-before.log" | head -n 5
	[ "$rc" != 0 ] && [ ! -f "$work/sample-before/ane_rust_meta_sample.ko" ] ||
		{ echo "the sample module built without rust/ metadata" >&2; return 1; }
	grep -q "can't find crate for" "$work/sample-before.log" ||
		{ echo "the sample build failed, but not for want of the kernel crate" >&2; return 1; }
	rc=0
	make -s -C /src kdir-check KDIR="$headers" >"$work/kdir-check.log" 2>&1 || rc=$?
	cat "$work/kdir-check.log"
	[ "$rc" != 0 ] && grep -q "lacks rust/libkernel.rmeta" "$work/kdir-check.log"
}
# rust_state KDIR: a digest of everything under KDIR/rust/.
rust_state() { (cd "$1" && find rust -type f 2>/dev/null | LC_ALL=C sort | xargs -r sha256sum) | sha256sum; }
untouched() { # KDIR DIGEST: KDIR/rust/ is as it was
	[ "$(rust_state "$1")" = "$2" ] || { echo "$1/rust changed" >&2; return 1; }
	[ "$(rust_state "$headers")" = "$headers_state" ] || { echo "$headers/rust changed" >&2; return 1; }
	echo "KDIR/rust unchanged"
}
headers_state=$(rust_state "$headers")
step "without rust/: a Rust module does not build, make kdir-check names rust/libkernel.rmeta" no_rust

# expect_exit LOG WANT_RC PATTERN... -- COMMAND...: the command exits with
# WANT_RC and its output contains every PATTERN (re:PATTERN: an extended
# regular expression).
expect_exit() {
	local log=$1 want=$2 rc=0 pats=()
	shift 2
	while [ "$1" != -- ]; do pats+=("$1"); shift; done
	shift
	"$@" >"$log" 2>&1 || rc=$?
	sed 's/^/    | /' "$log" | tail -n 25
	[ "$rc" = "$want" ] || { echo "exit status $rc, wanted $want" >&2; return 1; }
	local p
	for p in "${pats[@]}"; do
		case "$p" in
		re:*) grep -qE -- "${p#re:}" "$log" ;;
		*) grep -qF -- "$p" "$log" ;;
		esac || { echo "output lacks: $p" >&2; return 1; }
	done
	echo "exit status $rc as wanted"
}
# A copy of the headers tree sharing its files (edited files are replaced,
# never written in place).
clone_headers() {
	rm -rf "$1"
	cp -al "$headers" "$1"
}
run_tool() { withtc "$tool" --source "$src" --rustc rustc "${kvars[@]}" "$@"; }

other_rustc() {
	local k=$work/neg-rustc ver
	ver=$(echo "$rustc_text" | sed -n 's/^rustc \([0-9.]*\).*/\1/p')
	clone_headers "$k"
	local state
	state=$(rust_state "$k")
	sed -i 's/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT="rustc 1.93.1 (01f6ddf75 2026-02-11)"/' "$k/.config"
	expect_exit "$work/neg-rustc.log" 1 "rustc mismatch" "\"rustc 1.93.1 (01f6ddf75 2026-02-11)\"" \
		"rustup toolchain install 1.93.1" "RUSTUP_TOOLCHAIN=1.93.1" -- run_tool --kdir "$k" || return 1
	untouched "$k" "$state" || return 1
	# A real other rustc, when the chroot has one (trixie-backports').
	if [ -x /opt/rust-backports/bin/rustc ]; then
		echo "with $(/opt/rust-backports/bin/rustc --version):"
		expect_exit "$work/neg-rustc2.log" 1 "rustc mismatch" "$rustc_text" "rustup toolchain install $ver" -- \
			withtc "$tool" --kdir "$headers" --source "$src" --rustc /opt/rust-backports/bin/rustc "${kvars[@]}" || return 1
	else
		echo "(no second rustc in this chroot: only the .config case)"
	fi
	untouched "$headers" "$headers_state"
}
step "refused: a rustc other than the kernel's (exit 1, KDIR/rust untouched)" other_rustc

other_config() {
	local k=$work/neg-config state
	clone_headers "$k"
	state=$(rust_state "$k")
	# One option flipped in .config: no longer what the kernel was built with.
	grep -qx 'CONFIG_RUST_OVERFLOW_CHECKS=y' "$k/.config" || { echo "test kernel lacks CONFIG_RUST_OVERFLOW_CHECKS=y" >&2; return 1; }
	sed -i 's/^CONFIG_RUST_OVERFLOW_CHECKS=y$/# CONFIG_RUST_OVERFLOW_CHECKS is not set/' "$k/.config"
	# The source from the distribution's tarball this time (the one the test
	# kernel's source tree was unpacked from): --source-tarball.
	local tarball=/usr/src/linux-source-${krel%.*}.tar.xz srcarg=(--source "$src")
	[ ! -f "$tarball" ] || srcarg=(--source-tarball "$tarball")
	echo "source: ${srcarg[*]}"
	expect_exit "$work/neg-config.log" 1 "configuration mismatch" "CONFIG_RUST_OVERFLOW_CHECKS: y -> n" \
		"cannot match this kernel" -- withtc "$tool" "${srcarg[@]}" --rustc rustc "${kvars[@]}" --kdir "$k" || return 1
	untouched "$k" "$state"
}
step "refused: a .config other than the kernel's, option named (exit 1, KDIR/rust untouched)" other_config

other_source() {
	local k=$work/neg-source f=include/linux/kernel.h state
	clone_headers "$k"
	state=$(rust_state "$k")
	# The headers' copy of one source file differs: another tag or patch set.
	sed -i '$a /* another patch set */' "$k/$f"
	expect_exit "$work/neg-source.log" 1 "source mismatch" "$f" "not the source the kernel was built from" -- \
		run_tool --kdir "$k" || return 1
	untouched "$k" "$state"
}
step "refused: a source other than the kernel's, file named (exit 1, KDIR/rust untouched)" other_source

# ----------------------------------------------------------------------
regenerate() {
	local rc=0 t0
	t0=$(date +%s)
	run_tool --kdir "$headers" --workdir "$work/meta" --kallsyms "$kdir/System.map" >"$work/regen.log" 2>&1 || rc=$?
	cat "$work/regen.log"
	echo "ane-rust-meta: exit status $rc in $(($(date +%s) - t0)) s; work directory $(du -sh "$work/meta" | cut -f1)"
	[ "$rc" = 0 ] || return 1
	grep -q "verification: Module.symvers: \([0-9]*\)/\1 matched .*, 0 extra" "$work/regen.log" &&
		grep -q "verification: System.map: \([0-9]*\)/\1 present" "$work/regen.log" &&
		grep -q "verification: vmlinux: \([0-9]*\)/\1 exported symbols of equal size" "$work/regen.log" ||
		{ echo "a verification line is missing or incomplete" >&2; return 1; }
	cat "$headers/rust/.ane-rust-meta"
	grep -qxF "rustc=$rustc_text" "$headers/rust/.ane-rust-meta"
	# The same files as the kernel's own build has, none missing.
	diff <(cd "$kdir/rust" && ls *.rmeta *.so kernel/generated_*.rs) <(cd "$headers/rust" && ls *.rmeta *.so kernel/generated_*.rs) ||
		{ echo "installed files differ from the kernel build's rust/*.rmeta, *.so, kernel/generated_*.rs" >&2; return 1; }
	local f same=0 all=0
	for f in "$headers"/rust/*.rmeta; do
		all=$((all + 1))
		! cmp -s "$f" "$kdir/rust/${f##*/}" || same=$((same + 1))
	done
	echo "(for information: $same of $all .rmeta files are byte-identical to the kernel build's)"
	# The headers package's own file in rust/ is still there.
	[ -f "$headers/rust/kernel/Kconfig.test" ] || { echo "rust/kernel/Kconfig.test was removed" >&2; return 1; }
	headers_state=$(rust_state "$headers")
}
step "ane-rust-meta: rebuild, verify (Module.symvers, System.map, vmlinux sizes), install" regenerate

other_symbols() {
	local k=$work/neg-symbols before hash
	[ -f "$headers/rust/.ane-rust-meta" ] || { echo "needs the installed rust/ of the previous step" >&2; return 1; }
	clone_headers "$k"
	# The kernel's Rust exports carry another kernel-crate hash, as when the
	# kernel was built by another rustc build: nothing can match.
	hash=$(grep -o 'Cs[0-9A-Za-z]*_6kernel' "$k/Module.symvers" | head -n1)
	[ -n "$hash" ] || { echo "no kernel-crate symbol in Module.symvers" >&2; return 1; }
	sed -i "s/$hash/Cs0ther0Build0_6kernel/g" "$k/Module.symvers"
	before=$(rust_state "$k")
	expect_exit "$work/neg-symbols.log" 1 "re:Module.symvers: [0-9]+/[0-9]+ matched \(.*core ([0-9]+)/\1, .*kernel [0-9]{1,2}/[0-9]{3,}\), [0-9]{3,} extra" \
		"the kernel crate's symbol hash differs" \
		"cannot match this kernel" -- run_tool --kdir "$k" --workdir "$work/meta" --kallsyms "$kdir/System.map" || return 1
	untouched "$k" "$before"
}
step "refused: kernel exports of another build, counts reported (exit 1, installed rust/ untouched)" other_symbols

rerun() {
	local k=$work/foreign stamp1 rc=0
	stamp1=$(grep '^date=' "$headers/rust/.ane-rust-meta")
	sleep 1
	# Over its own installation: replaced, no --force needed.
	run_tool --kdir "$headers" --workdir "$work/meta" --kallsyms "$kdir/System.map" >"$work/rerun.log" 2>&1 || rc=$?
	tail -n 3 "$work/rerun.log"
	[ "$rc" = 0 ] || { cat "$work/rerun.log"; return 1; }
	[ "$(grep '^date=' "$headers/rust/.ane-rust-meta")" != "$stamp1" ] || { echo "the stamp was not rewritten" >&2; return 1; }
	headers_state=$(rust_state "$headers")
	# Metadata it did not install (here: its stamp gone) is not replaced
	# without --force, and that is said before any build.
	clone_headers "$k"
	rm "$k/rust/.ane-rust-meta"
	local state
	state=$(rust_state "$k")
	expect_exit "$work/foreign.log" 2 "already holds Rust metadata that ane-rust-meta did not install" "--force" -- \
		run_tool --kdir "$k" --workdir "$work/meta" || return 1
	! grep -q "make prepare" "$work/foreign.log" || { echo "it built before refusing" >&2; return 1; }
	untouched "$k" "$state"
}
step "re-run: replaces its own installation; metadata it did not install needs --force" rerun

removal() {
	local k=$work/remove
	clone_headers "$k"
	withtc "$tool" --remove --kdir "$k" || return 1
	! compgen -G "$k/rust/*.rmeta" >/dev/null && ! compgen -G "$k/rust/*.so" >/dev/null &&
		[ ! -e "$k/rust/.ane-rust-meta" ] && [ -f "$k/rust/kernel/Kconfig.test" ] ||
		{ echo "--remove left metadata behind, or removed the package's file" >&2; find "$k/rust" >&2; return 1; }
	echo "metadata and stamp removed; rust/kernel/Kconfig.test kept"
	untouched "$headers" "$headers_state" || return 1
	# --dry-run: every check runs (the kept work directory makes the build
	# incremental), nothing is installed.
	local state
	state=$(rust_state "$k")
	expect_exit "$work/dry-run.log" 0 "Module.symvers: 3" "dry run: verified; would install" -- \
		run_tool --kdir "$k" --workdir "$work/meta" --kallsyms "$kdir/System.map" --dry-run || return 1
	untouched "$k" "$state"
}
step "ane-rust-meta --remove (only what it installed), then --dry-run (installs nothing)" removal

# The C toolchain's version strings differ from the kernel's records (on a
# rolling distribution gcc moves on after the kernel package was built).
drift() {
	local k=$work/drift f state
	clone_headers "$k"
	for f in .config include/config/auto.conf include/generated/rustc_cfg; do
		sed -i 's/^\(\(--cfg=\)\{0,1\}CONFIG_CC_VERSION_TEXT=.*[0-9]\)\("\{0,1\}\)$/\1-older\3/' "$k/$f"
		grep -q 'CONFIG_CC_VERSION_TEXT=.*-older' "$k/$f" || { echo "no CONFIG_CC_VERSION_TEXT edited in $f" >&2; return 1; }
	done
	state=$(rust_state "$k")
	expect_exit "$work/drift1.log" 1 "CONFIG_CC_VERSION_TEXT:" "Only the versions of the C toolchain" "--accept-toolchain-drift" -- \
		run_tool --kdir "$k" --workdir "$work/meta" --dry-run || return 1
	expect_exit "$work/drift2.log" 0 "warning: make olddefconfig changed KDIR/.config" "only toolchain version strings differ" \
		"re:Module.symvers: ([0-9]+)/\1 matched" "dry run: verified" -- \
		run_tool --kdir "$k" --workdir "$work/meta" --dry-run --accept-toolchain-drift || return 1
	untouched "$k" "$state"
}
step "toolchain drift (CONFIG_CC_VERSION_TEXT): refused, named; accepted with --accept-toolchain-drift" drift

# ----------------------------------------------------------------------
sample_after() {
	build_sample "$headers" "$work/sample" >"$work/sample.log" 2>&1 || { cat "$work/sample.log"; return 1; }
	local ko=$work/sample/ane_rust_meta_sample.ko n
	modinfo "$ko" | grep -E '^(name|vermagic|license):'
	# It links against the kernel's Rust crates by their hashed names.
	n=$("${cross}nm" -u "$ko" | grep -cE '_(6kernel|4core)' || true)
	echo "$n undefined kernel/core crate symbols"
	[ "$n" -gt 0 ]
}
step "the sample Rust module builds against the headers tree" sample_after

ane_built=0
ane_module() {
	mkdir -p "$work/ane"
	rsync -a --delete --exclude=.git --exclude=/userspace/target /src/ "$work/ane/"
	# LLVM= : the kernel is GCC-built; whatever the Makefile's default, the
	# module follows the kernel's compiler.
	withtc make -C "$work/ane" KDIR="$headers" "${kvars[@]}" LLVM= ANE_TEST=1 modules \
		>"$work/ane-build.log" 2>&1 || { tail -n 40 "$work/ane-build.log"; return 1; }
	modinfo "$work/ane/ane.ko" | grep -E '^(name|vermagic):'
	ane_built=1
}
step "the test-flavour ane.ko builds against the headers tree" ane_module

initramfs() {
	local root=$work/initramfs tests=rustmeta_sample
	rm -rf "$root"
	mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,tests} "$root/lib/modules/$krel/extra"
	cp /opt/arm64-busybox/usr/bin/busybox "$root/bin/busybox"
	cp /src/tools/qemu/init.sh "$root/init"
	chmod +x "$root/init"
	cp /src/tools/qemu/tests/lib.sh /src/tools/rustmeta/guest/*.sh "$root/tests/"
	cp "$work/sample/ane_rust_meta_sample.ko" "$root/lib/modules/$krel/extra/"
	if [ "$ane_built" = 1 ]; then
		cp "$work/ane/ane.ko" "$root/lib/modules/$krel/extra/"
		tests+=,rustmeta_ane
	fi
	cp "$kdir/modules.builtin" "$kdir/modules.builtin.modinfo" "$kdir/modules.order" "$root/lib/modules/$krel/"
	depmod -b "$root" "$krel"
	(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$work/initramfs.cpio.gz"
	echo "$tests" >"$work/tests"
	echo "guest tests: $tests"
}
step "initramfs with the modules built against the regenerated metadata" initramfs

boot() {
	local tests
	tests=$(cat "$work/tests" 2>/dev/null) || return 1
	# The kernel image of the original build: the metadata must fit it.
	tools/qemu/boot.sh arm64 "$kdir" "$work/initramfs.cpio.gz" "$tests" "$work/qemu.log" || {
		tail -n 30 "$work/qemu.log"
		return 1
	}
	[ "$ane_built" = 1 ] || { echo "ane.ko was not built: only the sample was loaded" >&2; return 1; }
}
step "qemu arm64: the original kernel loads them (sample runs; ane binds a simulated T8103, /dev/accel/accel0)" boot

echo
echo "e2e duration: $(($(date +%s) - t_start)) s (inside the chroot)"
summary "ane-rust-meta e2e summary"

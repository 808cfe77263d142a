#!/usr/bin/env bash
# Build (or reuse) a test kernel. Prints the build directory as seen inside
# the chroot (/cache/...), which is the KDIR for the module build.
#
#   tools/kernel/build.sh x86_64|arm64 [7.2|7.3] [san|bench|prep]   (default 7.3)
#
# `san` is the sanitizer flavour (tools/kernel/sanitizers.config: KASAN,
# UBSAN, fault injection), built with clang (LLVM=1) because KASAN with Rust
# requires it; its build directory is named kbuild-ARCH-SERIES-san-KEY.
# `bench` (tools/kernel/bench.config) is the test kernel without its debug
# checkers, for `make bench` only. A flavour's fragment overrides the
# common ones: the last value of an option is the one requested.
#
# Every kernel is built with GCC, like the kernels Asahi users run, from
# Debian's linux-source-SERIES. The Rust toolchain is the series' own (see
# kernel_rust in tools/env/common.sh): 7.3 with trixie's rustc 1.85, the
# kernel minimum, 7.2 with trixie-backports' rustc, so the two bracket the
# target's 1.93.1. The build directory records the toolchain in
# .ane-toolchain (tools/kernel/with-toolchain.sh reads it), so a module is
# always built by the rustc that built its kernel.
#
# The build directory is keyed by the kernel source package version, the
# toolchain versions, the config fragments and ANE_KERNEL_RECIPE; it is
# complete when it holds '.ane-ready'.
source "$(dirname "$0")/../env/common.sh"

arch=${1:-}
series=${2:-7.3}
flavour=${3:-}
case "$arch" in
x86_64) karch=x86_64 image=arch/x86/boot/bzImage cross= ;;
arm64) karch=arm64 image=arch/arm64/boot/Image cross=aarch64-linux-gnu- ;;
*) die "usage: build.sh x86_64|arm64 [7.2|7.3] [san|bench|prep]" ;;
esac
rust=$(kernel_rust "$series") || die "usage: build.sh x86_64|arm64 [7.2|7.3] [san|bench|prep]"
target=all
case "$flavour" in
"") extra= llvm= ;;
san) extra=tools/kernel/sanitizers.config llvm=1 ;;
bench) extra=tools/kernel/bench.config llvm= ;;
prep) extra= llvm= target=modules_prepare ;;
*) die "usage: build.sh x86_64|arm64 [7.2|7.3] [san|bench|prep]" ;;
esac

root=$("$ANE_TOP/tools/env/mkchroot.sh")
manifest=$root/.ane-manifest
pick() { awk -v p="$1" '$1 == p { print $2 }' "$manifest"; }
srcver=$(pick linux-source-$series)
[ -n "$srcver" ] || die "linux-source-$series missing from the chroot"
case "$rust" in
system) rustver="rustc=$(pick rustc) rust-src=$(pick rust-src)" toolpath= ;;
backports) rustver=$(awk '$1 == "rust-backports:rustc" { print "rustc=" $2 }' "$manifest") toolpath=/opt/rust-backports/bin ;;
esac
gccver=$(pick gcc-14)
[ "$arch" = arm64 ] && gccver=$(pick gcc-14-aarch64-linux-gnu)
toolchain="$rustver bindgen=$(pick bindgen) libclang=$(pick libclang1-19) gcc=$gccver binutils=$(pick binutils)"
frags=("$ANE_TOP/tools/kernel/common.config" "$ANE_TOP/tools/kernel/$arch.config")
[ -z "$extra" ] || frags+=("$ANE_TOP/$extra")
[ -z "$llvm" ] || toolchain="$toolchain clang=$(pick clang-19) lld=$(pick lld-19) llvm=1"
key=$( { echo "recipe $ANE_KERNEL_RECIPE $srcver $toolchain"; cat "${frags[@]}"; } | sha256sum | cut -c1-16)

src=linux-src-$srcver
out=kbuild-$arch-$series${flavour:+-$flavour}-$key
if [ -f "$ANE_CACHE/$out/.ane-ready" ]; then
	cache_note hit "$out"
	echo "/cache/$out"
	exit 0
fi
with_lock "kernel-$arch-$series"
if [ -f "$ANE_CACHE/$out/.ane-ready" ]; then
	cache_note hit "$out"
	echo "/cache/$out"
	exit 0
fi
cache_note build "$out"

log "building the $arch $series kernel ($srcver; $toolchain) in $ANE_CACHE/$out"
start=$(date +%s)
jobs=$(nproc)
"$ANE_TOP/tools/env/run.sh" /bin/bash -euo pipefail -c '
	src=/cache/$1 out=/cache/$2 karch=$3 image=$4 jobs=$5 arch=$6 series=$7 cross=$8 toolpath=$9
	extra=${10} llvm=${11} target=${12}
	# One unpacked source per version, shared by the architectures (the
	# lock is held only while unpacking).
	(
		flock 9
		if [ ! -f "$src/.ane-ready" ]; then
			rm -rf "$src" "$src.tmp"
			mkdir -p "$src.tmp"
			tar -C "$src.tmp" --strip-components=1 -xJf "/usr/src/linux-source-$series.tar.xz"
			touch "$src.tmp/.ane-ready"
			mv "$src.tmp" "$src"
		fi
	) 9>"/cache/.lock-src-$series"
	rm -rf "$out"
	mkdir -p "$out"
	echo "$toolpath" >"$out/.ane-toolchain"
	[ -z "$toolpath" ] || export PATH="$toolpath:$PATH"
	# GCC (CROSS_COMPILE for arm64), as the kernels users run are built.
	# The sanitizer flavour alone is built with clang (see sanitizers.config).
	mk() { make -C "$src" O="$out" ARCH="$karch" ${cross:+CROSS_COMPILE=$cross} ${llvm:+LLVM=1} -j"$jobs" "$@"; }
	mk tinyconfig >/dev/null
	KCONFIG_CONFIG="$out/.config" "$src/scripts/kconfig/merge_config.sh" -m -O "$out" \
		"$out/.config" tools/kernel/common.config "tools/kernel/$arch.config" $extra >/dev/null
	mk olddefconfig >/dev/null
	# Every requested option must have survived dependency resolution: the
	# last value a fragment gives it (a flavour overrides the common ones);
	# "=n" is met by an option that is off or absent.
	missing=0
	frags="tools/kernel/common.config tools/kernel/$arch.config $extra"
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*) ;;
		*) continue ;;
		esac
		opt=${line%%=*}
		[ "$(grep -h "^$opt=" $frags | tail -n 1)" = "$line" ] || continue
		case "$line" in
		*=n) grep -q "^$opt=" "$out/.config" || continue ;;
		*) grep -qxF -- "$line" "$out/.config" && continue ;;
		esac
		echo "kernel config: requested \"$line\" but got: $(grep -E "(^|# )$opt[= ]" "$out/.config" || echo "(absent: unmet dependency)")" >&2
		missing=1
	done < <(cat $frags)
	[ "$missing" = 0 ] || exit 1
	if [ "$target" = modules_prepare ]; then
		mk modules_prepare
		test -f "$out/rust/libkernel.rmeta"
		test -f "$out/rust/libmacros.so"
		: >"$out/Module.symvers"
		touch "$out/.ane-prepared-only"
	else
		mk
		test -f "$out/$image"
		test -f "$out/rust/libkernel.rmeta"
		test -f "$out/Module.symvers"
	fi
' build "$src" "$out" "$karch" "$image" "$jobs" "$arch" "$series" "$cross" "$toolpath" "$extra" "$llvm" "$target" >"$ANE_CACHE/$out.log" 2>&1 || {
	tail -n 40 "$ANE_CACHE/$out.log" >&2
	die "kernel build failed; full log: $ANE_CACHE/$out.log"
}
touch "$ANE_CACHE/$out/.ane-ready"
log "$arch $series kernel built in $(($(date +%s) - start)) s"
echo "/cache/$out"

#!/usr/bin/env bash
# Build (or reuse) a test kernel. Prints the build directory as seen inside
# the chroot (/cache/...), which is the KDIR for the module build.
#
#   tools/kernel/build.sh x86_64|arm64
#
# The build directory is keyed by the kernel source package version, the
# toolchain versions, the config fragments and ANE_KERNEL_RECIPE; it is
# complete when it holds '.ane-ready'.
source "$(dirname "$0")/../env/common.sh"

arch=${1:-}
case "$arch" in
x86_64) karch=x86_64 image=arch/x86/boot/bzImage ;;
arm64) karch=arm64 image=arch/arm64/boot/Image ;;
*) die "usage: build.sh x86_64|arm64" ;;
esac

root=$("$ANE_TOP/tools/env/mkchroot.sh")
manifest=$root/.ane-manifest
pick() { awk -v p="$1" '$1 == p { print $2 }' "$manifest"; }
srcver=$(pick linux-source-$ANE_KVER_SERIES)
[ -n "$srcver" ] || die "linux-source-$ANE_KVER_SERIES missing from the chroot"
toolchain="rustc=$(pick rustc) rust-src=$(pick rust-src) bindgen=$(pick bindgen) clang=$(pick clang-19) lld=$(pick lld-19)"
frags=("$ANE_TOP/tools/kernel/common.config" "$ANE_TOP/tools/kernel/$arch.config")
key=$( { echo "recipe $ANE_KERNEL_RECIPE $srcver $toolchain"; cat "${frags[@]}"; } | sha256sum | cut -c1-16)

src=linux-src-$srcver
out=kbuild-$arch-$key
if [ -f "$ANE_CACHE/$out/.ane-ready" ]; then
	echo "/cache/$out"
	exit 0
fi
with_lock "kernel-$arch"
if [ -f "$ANE_CACHE/$out/.ane-ready" ]; then
	echo "/cache/$out"
	exit 0
fi

log "building the $arch kernel ($srcver; $toolchain) in $ANE_CACHE/$out"
start=$(date +%s)
jobs=$(nproc)
"$ANE_TOP/tools/env/run.sh" /bin/bash -euo pipefail -c '
	src=/cache/$1 out=/cache/$2 karch=$3 image=$4 jobs=$5 arch=$6
	if [ ! -f "$src/.ane-ready" ]; then
		rm -rf "$src" "$src.tmp"
		mkdir -p "$src.tmp"
		tar -C "$src.tmp" --strip-components=1 -xJf /usr/src/linux-source-7.3.tar.xz
		touch "$src.tmp/.ane-ready"
		mv "$src.tmp" "$src"
	fi
	rm -rf "$out"
	mkdir -p "$out"
	mk() { make -C "$src" O="$out" ARCH="$karch" LLVM=1 -j"$jobs" "$@"; }
	mk tinyconfig >/dev/null
	KCONFIG_CONFIG="$out/.config" "$src/scripts/kconfig/merge_config.sh" -m -O "$out" \
		"$out/.config" tools/kernel/common.config "tools/kernel/$arch.config" >/dev/null
	mk olddefconfig >/dev/null
	# Every requested option must have survived dependency resolution.
	missing=0
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=n) want="# ${line%=n} is not set" ;;
		CONFIG_*) want=$line ;;
		*) continue ;;
		esac
		if ! grep -qxF -- "$want" "$out/.config"; then
			echo "kernel config: requested \"$line\" but got: $(grep -E "(^|# )${line%%=*}[= ]" "$out/.config" || echo "(absent: unmet dependency)")" >&2
			missing=1
		fi
	done < <(cat tools/kernel/common.config "tools/kernel/$arch.config")
	[ "$missing" = 0 ] || exit 1
	mk
	test -f "$out/$image"
	test -f "$out/rust/libkernel.rmeta"
	test -f "$out/Module.symvers"
' build "$src" "$out" "$karch" "$image" "$jobs" "$arch" >"$ANE_CACHE/$out.log" 2>&1 || {
	tail -n 40 "$ANE_CACHE/$out.log" >&2
	die "kernel build failed; full log: $ANE_CACHE/$out.log"
}
touch "$ANE_CACHE/$out/.ane-ready"
log "$arch kernel built in $(($(date +%s) - start)) s"
echo "/cache/$out"

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# A real DKMS run of the ane package against the cached 7.3 test kernels.
#
#   tools/dkms/check.sh          (from the repository root, on the host)
#
# Runs itself inside the build chroot. There, in the run's private mount
# namespace only, tmpfs hides /usr/lib/modules, /usr/src and /var/lib/dkms,
# so nothing of the chroot changes: the DKMS source tree is installed to
# /usr/src/ane-<version> (packaging/common/install-dkms-src.sh, as the
# packages do), /lib/modules/<release>/build points at a test kernel, and
# dkms add / build run as on a user's machine. Checked:
#   - the source tree registers (dkms add, status "added");
#   - arm64 kernel: dkms build succeeds, status "built", modinfo of the
#     built ane.ko (aliases of the four compatibles, licence, vermagic);
#   - x86_64 kernel: the same, with BUILD_EXCLUSIVE_ARCH widened by a
#     --directive of this test (dkms.conf itself says aarch64 only);
#   - without that directive, an x86_64 build is skipped (exit 77);
#   - a kernel without CONFIG_RUST is skipped (exit 77);
#   - PRE_BUILD stops a kernel tree without rust/*.rmeta, and a rustc that is
#     not the kernel's, each with a message naming what to install.
# Both test kernels report the same release (7.3.4-ane-test), so the build
# symlink is re-pointed between the two builds.
# Ends with "N passed, N failed".
set -euo pipefail

if [ "${ANE_IN_CHROOT:-}" != 1 ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	kx=$("$top/tools/kernel/build.sh" x86_64)
	ka=$("$top/tools/kernel/build.sh" arm64)
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 ANE_KDIR_X86="$kx" ANE_KDIR_ARM="$ka" \
		tools/dkms/check.sh "$@"
fi

cd /src
ANE_STEP_MARK=---
source "$(dirname "${BASH_SOURCE[0]}")/../steps.sh"

# Everything DKMS writes lives on tmpfs in this mount namespace only.
for d in /usr/lib/modules /usr/src /var/lib/dkms; do
	mkdir -p "$d" 2>/dev/null || true
	mount -t tmpfs tmpfs "$d"
done

version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' dkms.conf)
rel=$(cat "$ANE_KDIR_X86/include/config/kernel.release")
[ "$rel" = "$(cat "$ANE_KDIR_ARM/include/config/kernel.release")" ] || {
	echo "the two test kernels have different releases; this test assumes one" >&2
	exit 1
}
point_build() { mkdir -p "/usr/lib/modules/$1" && ln -sfn "$2" "/usr/lib/modules/$1/build"; }
log() { echo "/var/lib/dkms/ane/$version/build/make.log"; }

install_src() {
	packaging/common/install-dkms-src.sh /src / "$version"
	find "/usr/src/ane-$version" -type f | sed "s#^/usr/src/##" | sort
}
step "DKMS source tree installed as the packages do (/usr/src/ane-$version)" install_src

add() {
	dkms add "ane/$version"
	dkms status ane | tr -s ' ' | grep "ane/$version: added"
}
step "dkms add ane/$version" add

# build_for ARCH KDIR [DIRECTIVE]: a real dkms build, then modinfo.
build_for() {
	local arch=$1 kdir=$2 ko rc=0
	shift 2
	point_build "$rel" "$kdir"
	dkms build "ane/$version" -k "$rel" -a "$arch" "$@" || rc=$?
	if [ "$rc" != 0 ]; then
		tail -n 40 "$(log)" 2>/dev/null || true
		return 1
	fi
	dkms status ane | grep -q "ane/$version, $rel, $arch: built" || { dkms status ane; return 1; }
	ko=$(ls "/var/lib/dkms/ane/$version/$rel/$arch/module/"ane.ko*)
	echo "built $ko"
	grep "are usable; rustc matches" "/var/lib/dkms/ane/$version/$rel/$arch/log/make.log" ||
		{ echo "PRE_BUILD did not run" >&2; return 1; }
	# LLVM=1 (appended by DKMS for a clang-built kernel) reached Kbuild.
	grep -q "^make -C .* LLVM=1 ARCH=" "/var/lib/dkms/ane/$version/$rel/$arch/log/make.log" ||
		{ echo "the module was not built with LLVM=1" >&2; return 1; }
	tools/modinfo-check.sh "$ko" "$kdir"
}
step "dkms build, arm64 test kernel (aarch64) + modinfo" build_for aarch64 "$ANE_KDIR_ARM"
step "dkms build, x86_64 test kernel (arch widened by the test) + modinfo" \
	build_for x86_64 "$ANE_KDIR_X86" --directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$"

# expect_rc WANT COMMAND...: the command's exit status must be WANT
# ("nonzero": anything but 0 and 77).
expect_rc() {
	local want=$1 rc=0
	shift
	"$@" >/tmp/dkms-neg.log 2>&1 || rc=$?
	case $want in
	nonzero) [ "$rc" != 0 ] && [ "$rc" != 77 ] ;;
	*) [ "$rc" = "$want" ] ;;
	esac || { echo "exit status $rc, wanted $want" >&2; tail -n 20 /tmp/dkms-neg.log >&2; return 1; }
	echo "exit status $rc as wanted"
}

skip_arch() {
	point_build "$rel" "$ANE_KDIR_X86"
	dkms remove "ane/$version" -k "$rel" -a x86_64 >/dev/null 2>&1 || true
	expect_rc 77 dkms build "ane/$version" -k "$rel" -a x86_64
}
step "BUILD_EXCLUSIVE_ARCH: x86_64 skipped without the test's override (77)" skip_arch

# A fake 7.3 tree: the x86_64 tree's Makefile, configuration and (optionally)
# Rust metadata and symbols, with edits.
fake_tree() {
	local name=$1 d=/tmp/$1
	rm -rf "$d"
	mkdir -p "$d/include/config"
	cp "$ANE_KDIR_X86/Makefile" "$ANE_KDIR_X86/.config" "$d/"
	cp "$ANE_KDIR_X86/include/config/auto.conf" "$ANE_KDIR_X86/include/config/kernel.release" "$d/include/config/"
	point_build "$name" "$d"
	echo "$d"
}

skip_norust() {
	local d
	d=$(fake_tree 7.3.4-norust)
	sed -i '/^CONFIG_RUST=/d' "$d/.config" "$d/include/config/auto.conf"
	expect_rc 77 dkms build "ane/$version" -k 7.3.4-norust -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$"
}
step "BUILD_EXCLUSIVE_CONFIG: a kernel without CONFIG_RUST is skipped (77)" skip_norust

no_rmeta() {
	local d
	d=$(fake_tree 7.3.4-normeta)
	ln -s "$ANE_KDIR_X86/Module.symvers" "$d/Module.symvers"
	expect_rc nonzero dkms build "ane/$version" -k 7.3.4-normeta -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$" || return 1
	grep -h "ane:" "$(log)" || true
	grep -q "lacks rust/libkernel.rmeta" "$(log)" && grep -q "linux-lib-rust\|rust/" "$(log)"
}
step "PRE_BUILD: headers without rust/*.rmeta are refused, naming what to install" no_rmeta

wrong_rustc() {
	local d
	d=$(fake_tree 7.3.4-otherrustc)
	ln -s "$ANE_KDIR_X86/Module.symvers" "$d/Module.symvers"
	ln -s "$ANE_KDIR_X86/rust" "$d/rust"
	# The kernel says it was built by another rustc than the one installed.
	sed -i 's/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT="rustc 1.93.1 (01f6ddf75 2026-02-11)"/' "$d/.config"
	expect_rc nonzero dkms build "ane/$version" -k 7.3.4-otherrustc -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$" || return 1
	grep -h "ane:" "$(log)" || true
	grep -q "Install rustc 1.93.1" "$(log)" && grep -q "rustup toolchain install 1.93.1" "$(log)"
}
step "PRE_BUILD: a rustc other than the kernel's is refused, naming the version" wrong_rustc

summary "dkms summary"

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# A real DKMS run of the ane package against the cached 7.2 and 7.3 test
# kernels (GCC-built, like the kernels users run).
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
#   - arm64 7.3 and arm64 7.2 kernels: dkms build succeeds, status "built",
#     no LLVM=1 for a GCC kernel, modinfo of the built ane.ko (aliases of
#     the four compatibles, licence, vermagic);
#   - x86_64 kernel: the same, with BUILD_EXCLUSIVE_ARCH widened by a
#     --directive of this test (dkms.conf itself says aarch64 only); make
#     check passes the clang-built sanitizer kernel, so DKMS must add
#     LLVM=1 there, and only there;
#   - without that directive, an x86_64 build is skipped (exit 77);
#   - skipped (exit 77): a kernel without CONFIG_RUST, a kernel with its own
#     ANE driver (CONFIG_DRM_ACCEL_ANE), a kernel older than 7.1;
#   - the rust/ files docs/patches/linux-asahi-headers-rust.patch installs
#     are enough for DKMS to build ane.ko;
#   - a 7.1 kernel is not skipped: its headers without rust/ are stopped by
#     PRE_BUILD naming ane-rust-meta;
#   - PRE_BUILD stops a rustc that is not the kernel's, with the right advice
#     for a rustup-built kernel (Arch) and a Fedora-built one;
#   - PRE_BUILD's messages reach dkms's own output (the terminal), not only
#     make.log, where dkms >= 3.1.5 (this chroot: 3.2.2) puts them;
#   - with rustup (a shim recording RUSTUP_TOOLCHAIN, root's default another
#     version), a kernel built by rustc 1.93.1 is checked and compiled with
#     RUSTUP_TOOLCHAIN=1.93.1, never the default; a kernel whose toolchain is
#     not installed is refused, saying which to install.
# The x86_64 and arm64 7.3 kernels report the same release, so the build
# symlink is re-pointed between builds. dkms runs under
# tools/kernel/with-toolchain.sh: the rustc that built each kernel first in
# PATH and, for arm64, CROSS_COMPILE in the environment (a user builds
# natively).
# Ends with "N passed, N failed".
set -euo pipefail

if [ "${ANE_IN_CHROOT:-}" != 1 ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	# The kernels make check passes (ANE_KDIR_*), or these.
	kx=${ANE_KDIR_X86:-$("$top/tools/kernel/build.sh" x86_64 7.3 san)}
	ka=${ANE_KDIR_ARM:-$("$top/tools/kernel/build.sh" arm64 7.3)}
	ka72=${ANE_KDIR_ARM72:-$("$top/tools/kernel/build.sh" arm64 7.2 prep)}
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 ANE_KDIR_X86="$kx" ANE_KDIR_ARM="$ka" \
		ANE_KDIR_ARM72="$ka72" tools/dkms/check.sh "$@"
fi

cd /src
ANE_STEP_MARK=---
source "$(dirname "${BASH_SOURCE[0]}")/../steps.sh"

# Everything DKMS writes lives on tmpfs in this mount namespace only.
for d in /usr/lib/modules /usr/src /var/lib/dkms; do
	mkdir -p "$d" 2>/dev/null || true
	mount -t tmpfs tmpfs "$d"
done

version=$(cat VERSION)
krel() { cat "$1/include/config/kernel.release"; }
point_build() { mkdir -p "/usr/lib/modules/$1" && ln -sfn "$2" "/usr/lib/modules/$1/build"; }
log() { echo "/var/lib/dkms/ane/$version/build/make.log"; }
# overlay KDIR: from here on, KDIR is a writable copy-on-write view of
# itself (overlayfs, upper layer on this run's tmpfs, in this run's mount
# namespace only: the cached kernel never changes); the original stays
# readable at /tmp/orig-<name>. A kernel build tree records its own path
# (its Makefile sets KBUILD_OUTPUT), so an edited tree must keep the path.
overlay() {
	local k n
	k=$(readlink -f "$1")
	n=${k##*/}
	mkdir -p "/tmp/ovl-$n/upper" "/tmp/ovl-$n/work" "/tmp/orig-$n"
	mount --bind "$k" "/tmp/orig-$n"
	mount -t overlay overlay -o "lowerdir=/tmp/orig-$n,upperdir=/tmp/ovl-$n/upper,workdir=/tmp/ovl-$n/work" "$k"
}
unoverlay() {
	local k n
	k=$(readlink -f "$1")
	n=${k##*/}
	umount "$k" && umount "/tmp/orig-$n" && rm -rf "/tmp/ovl-$n"
}

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
	local arch=$1 kdir=$2 ko rc=0 rel st
	shift 2
	rel=$(krel "$kdir")
	point_build "$rel" "$kdir"
	dkms remove "ane/$version" -k "$rel" -a "$arch" >/dev/null 2>&1 || true
	tools/kernel/with-toolchain.sh "$kdir" dkms build "ane/$version" -k "$rel" -a "$arch" "$@" || rc=$?
	if [ "$rc" != 0 ]; then
		tail -n 40 "$(log)" 2>/dev/null || true
		return 1
	fi
	# Not `dkms status | grep -q`: with pipefail, grep's early exit can fail
	# the pipe once dkms lists more than one kernel.
	st=$(dkms status ane)
	grep -q "ane/$version, $rel, $arch: built" <<<"$st" || { echo "$st"; return 1; }
	ko=$(ls "/var/lib/dkms/ane/$version/$rel/$arch/module/"ane.ko*)
	echo "built $ko"
	grep "are usable; rustc matches" "/var/lib/dkms/ane/$version/$rel/$arch/log/make.log" ||
		{ echo "PRE_BUILD did not run" >&2; return 1; }
	# DKMS appends LLVM=1 for a clang-built kernel, and only for one.
	if grep -qx 'CONFIG_CC_IS_CLANG=y' "$kdir/include/config/auto.conf"; then
		grep -q "LLVM=1" "/var/lib/dkms/ane/$version/$rel/$arch/log/make.log" || {
			echo "the module of a clang-built kernel was built without LLVM=1" >&2
			return 1
		}
		echo "clang-built kernel: built with LLVM=1"
	elif grep -q "LLVM=1" "/var/lib/dkms/ane/$version/$rel/$arch/log/make.log"; then
		echo "the module of a GCC-built kernel was built with LLVM=1" >&2
		return 1
	fi
	tools/modinfo-check.sh "$ko" "$kdir" || return 1
	# The module's version is the project's one version (VERSION).
	[ "$(modinfo -F version "$ko")" = "$version" ] || { echo "modinfo version: '$(modinfo -F version "$ko")', not $version" >&2; return 1; }
	echo "modinfo version: $version"
}
step "dkms build, arm64 7.3 test kernel (aarch64, rustc 1.85) + modinfo" build_for aarch64 "$ANE_KDIR_ARM"
step "dkms build, arm64 7.2 test kernel (aarch64, backports rustc) + modinfo" build_for aarch64 "$ANE_KDIR_ARM72"
step "dkms build, x86_64 kernel (arch widened by the test) + modinfo" \
	build_for x86_64 "$ANE_KDIR_X86" --directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$"

# docs/patches/linux-asahi-headers-rust.patch makes asahi-alarm's
# linux-asahi-headers ship rust/. Its file set is enough: a build tree whose
# rust/ holds only what the patch's lines install (run here, with O= the
# arm64 7.3 kernel's build directory) builds ane.ko through DKMS.
patch_rust_set() {
	local k n block ko rc=0
	k=$(readlink -f "$ANE_KDIR_ARM")
	n=${k##*/}
	block=$(sed -n 's/^+//p' docs/patches/linux-asahi-headers-rust.patch | grep -v '^+')
	grep -q 'Installing Rust files' <<<"$block" || { echo "no Rust block in the patch" >&2; return 1; }
	eval "package_rust() {
$block
}"
	overlay "$k"
	rm -rf "$k/rust"
	(O=/tmp/orig-$n builddir=$k package_rust) || rc=1
	echo "rust/ now holds only: $(cd "$k/rust" && find . -type f | sort | tr '\n' ' ')"
	point_build "$(krel "$k")" "$k"
	dkms remove "ane/$version" -k "$(krel "$k")" -a aarch64 >/dev/null 2>&1 || true
	[ "$rc" = 0 ] && tools/kernel/with-toolchain.sh "$k" dkms build "ane/$version" -k "$(krel "$k")" -a aarch64 \
		>/tmp/dkms-patch.log 2>&1 || { cat /tmp/dkms-patch.log; tail -n 40 "$(log)" 2>/dev/null; rc=1; }
	[ "$rc" = 0 ] && ko=$(ls "/var/lib/dkms/ane/$version/$(krel "$k")/aarch64/module/"ane.ko*) && echo "built $ko"
	dkms remove "ane/$version" -k "$(krel "$k")" -a aarch64 >/dev/null 2>&1 || true
	unoverlay "$k"
	return $rc
}
step "docs/patches/linux-asahi-headers-rust.patch: a build tree with only the rust/ files it installs builds ane.ko (arm64 7.3)" patch_rust_set

# expect_rc WANT COMMAND...: the command's exit status must be WANT
# ("nonzero": anything but 0 and 77).
expect_rc() {
	local want=$1 rc=0
	shift
	# Appending, as a terminal or pipe takes it: PRE_BUILD adds its lines
	# to dkms's own stderr (on_terminal).
	: >/tmp/dkms-neg.log
	"$@" >>/tmp/dkms-neg.log 2>&1 || rc=$?
	case $want in
	nonzero) [ "$rc" != 0 ] && [ "$rc" != 77 ] ;;
	*) [ "$rc" = "$want" ] ;;
	esac || { echo "exit status $rc, wanted $want" >&2; tail -n 20 /tmp/dkms-neg.log >&2; return 1; }
	echo "exit status $rc as wanted"
}

skip_arch() {
	local rel
	rel=$(krel "$ANE_KDIR_X86")
	point_build "$rel" "$ANE_KDIR_X86"
	dkms remove "ane/$version" -k "$rel" -a x86_64 >/dev/null 2>&1 || true
	expect_rc 77 dkms build "ane/$version" -k "$rel" -a x86_64
}
step "BUILD_EXCLUSIVE_ARCH: x86_64 skipped without the test's override (77)" skip_arch

# on_terminal PATTERN...: dkms's own output of the last expect_rc (what the
# user sees; dkms >= 3.1.5 puts PRE_BUILD's output in make.log only) says
# each PATTERN.
on_terminal() {
	local w
	for w in "$@"; do
		grep -qF -- "$w" /tmp/dkms-neg.log || {
			echo "the terminal does not show: $w; it showed:" >&2
			sed 's/^/    | /' /tmp/dkms-neg.log >&2
			return 1
		}
	done
	echo "on the terminal:"
	grep '^ane:' /tmp/dkms-neg.log | sed 's/^/    | /'
}

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

skip_own_ane() {
	local d
	d=$(fake_tree 7.3.4-ownane)
	echo "CONFIG_DRM_ACCEL_ANE=m" >>"$d/.config"
	echo "CONFIG_DRM_ACCEL_ANE=m" >>"$d/include/config/auto.conf"
	expect_rc 77 dkms build "ane/$version" -k 7.3.4-ownane -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$"
}
step "BUILD_EXCLUSIVE_CONFIG: a kernel with its own ANE driver (CONFIG_DRM_ACCEL_ANE) is skipped (77)" skip_own_ane

skip_old() {
	fake_tree 7.0.9-old >/dev/null
	expect_rc 77 dkms build "ane/$version" -k 7.0.9-old -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$"
}
step "BUILD_EXCLUSIVE_KERNEL_MIN: a kernel older than 7.1 is skipped (77)" skip_old

asahi_71_norust() {
	local d
	# The release string of the target; its headers (like
	# linux-asahi-headers) have Module.symvers but no rust/.
	d=$(fake_tree 7.1.13-3-1-ARCH)
	ln -s "$ANE_KDIR_X86/Module.symvers" "$d/Module.symvers"
	expect_rc nonzero dkms build "ane/$version" -k 7.1.13-3-1-ARCH -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$" || return 1
	grep -h "ane:" "$(log)" || true
	grep -q "lacks rust/libkernel.rmeta" "$(log)" && grep -q "ane-rust-meta" "$(log)" || return 1
	on_terminal "lacks rust/libkernel.rmeta" "ane-rust-meta"
}
step "7.1 (linux-asahi 7.1.13) is built, and its headers without rust/ are stopped naming ane-rust-meta" asahi_71_norust

no_rmeta() {
	local d
	d=$(fake_tree 7.3.4-normeta)
	ln -s "$ANE_KDIR_X86/Module.symvers" "$d/Module.symvers"
	expect_rc nonzero dkms build "ane/$version" -k 7.3.4-normeta -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$" || return 1
	grep -h "ane:" "$(log)" || true
	grep -q "lacks rust/libkernel.rmeta" "$(log)" && grep -q "kernel-16k-devel" "$(log)" || return 1
	on_terminal "lacks rust/libkernel.rmeta" "kernel-16k-devel"
}
step "PRE_BUILD: headers without rust/*.rmeta are refused, naming what to install, on the terminal" no_rmeta

# wrong_rustc NAME VERSION_TEXT WANT...: a kernel that says it was built by
# another rustc than the one installed is refused; the log says each WANT.
wrong_rustc() {
	local name=$1 text=$2 d w
	shift 2
	d=$(fake_tree "$name")
	ln -s "$ANE_KDIR_X86/Module.symvers" "$d/Module.symvers"
	ln -s "$ANE_KDIR_X86/rust" "$d/rust"
	sed -i "s/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT=\"$text\"/" "$d/.config"
	expect_rc nonzero dkms build "ane/$version" -k "$name" -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$" || return 1
	grep -h "ane:" "$(log)" || true
	for w in "$@"; do
		grep -qF "$w" "$(log)" || { echo "the advice lacks: $w" >&2; return 1; }
	done
	on_terminal "$@"
}
step "PRE_BUILD: another rustc than an Arch kernel's (rustup 1.93.1) is refused, advising rustup, on the terminal" \
	wrong_rustc 7.3.4-otherrustc "rustc 1.93.1 (01f6ddf75 2026-02-11)" \
	"Install rustc 1.93.1 with rustup" "rustup toolchain install 1.93.1"
step "PRE_BUILD: another rustc than a Fedora kernel's is refused, naming Fedora's rust build, on the terminal" \
	wrong_rustc 7.3.4-fedorarustc "rustc 1.93.1 (01f6ddf75 2026-02-11) (Fedora 1.93.1-1.fc43)" \
	"Fedora's rust package 1.93.1-1.fc43" "dnf install rust-1.93.1-1.fc43"

# A fake rustup on PATH, as root has on Arch: its rustc proxy records the
# RUSTUP_TOOLCHAIN of every call. Installed toolchains: 1.93.1 (it prints
# the Arch kernel's text and compiles with this kernel's real rustc);
# root's `rustup default` is 1.99.0, which built no kernel here. Nothing
# may use the default.
shim=/tmp/rustup-shim
mk_shim() {
	local real
	real=$(tools/kernel/with-toolchain.sh "$ANE_KDIR_X86" sh -c 'command -v rustc')
	rm -rf "$shim"
	mkdir -p "$shim/bin"
	cat >"$shim/bin/rustc" <<EOS
#!/bin/sh
echo "RUSTUP_TOOLCHAIN=\${RUSTUP_TOOLCHAIN:-(default)} \$*" >>$shim/calls
case "\${RUSTUP_TOOLCHAIN:-}" in
1.93.1) [ "\$1" != --version ] || { echo "rustc 1.93.1 (01f6ddf75 2026-02-11)"; exit 0; }; exec $real "\$@" ;;
"") [ "\$1" != --version ] || { echo "rustc 1.99.0 (0123456789 2026-09-01)"; exit 0; }; echo "error: the default toolchain 1.99.0 built no kernel here" >&2; exit 1 ;;
*) echo "error: toolchain '\$RUSTUP_TOOLCHAIN' is not installed" >&2; exit 1 ;;
esac
EOS
	cat >"$shim/bin/rustup" <<EOS
#!/bin/sh
echo "rustup \$*" >>$shim/calls
case "\$1" in --version) echo "rustup 1.28.2 (shim)" ;; default) echo "1.99.0-x86_64-unknown-linux-gnu (default)" ;; esac
EOS
	chmod +x "$shim/bin/rustc" "$shim/bin/rustup"
	: >"$shim/calls"
}
rustup_select() {
	local rc=0
	# The x86_64 kernel, saying (in .config, what dkms.conf and PRE_BUILD
	# read) that rustup's 1.93.1 built it.
	overlay "$ANE_KDIR_X86"
	rustup_select_in || rc=1
	unoverlay "$ANE_KDIR_X86"
	return $rc
}
rustup_select_in() {
	local d rel rc=0 mlog
	mk_shim
	d=$(readlink -f "$ANE_KDIR_X86")
	sed -i 's/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT="rustc 1.93.1 (01f6ddf75 2026-02-11)"/' "$d/.config"
	rel=$(krel "$d")
	point_build "$rel" "$d"
	dkms remove "ane/$version" -k "$rel" -a x86_64 >/dev/null 2>&1 || true
	PATH=$shim/bin:$PATH tools/kernel/with-toolchain.sh "$d" env PATH="$shim/bin:$PATH" \
		dkms build "ane/$version" -k "$rel" -a x86_64 --directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$" \
		>/tmp/dkms-rustup.log 2>&1 || rc=$?
	mlog=/var/lib/dkms/ane/$version/$rel/x86_64/log/make.log
	[ -f "$mlog" ] || mlog=$(log)
	grep -E "^ane:|# command: make" "$mlog" | sed 's/^/    | /'
	[ "$rc" = 0 ] || { tail -n 30 /tmp/dkms-rustup.log "$mlog"; echo "dkms build failed ($rc)" >&2; return 1; }
	grep -q "rustc matches (rustc 1.93.1 (01f6ddf75 2026-02-11), rustup toolchain 1.93.1)" "$mlog" ||
		{ echo "PRE_BUILD did not check rustup toolchain 1.93.1" >&2; return 1; }
	grep "# command: make" "$mlog" | grep -q "RUSTUP_TOOLCHAIN=1.93.1" ||
		{ echo "the build command does not select RUSTUP_TOOLCHAIN=1.93.1" >&2; return 1; }
	echo "rustc calls: $(grep -c '^RUSTUP_TOOLCHAIN=' "$shim/calls") with RUSTUP_TOOLCHAIN=1.93.1: $(grep -c '^RUSTUP_TOOLCHAIN=1.93.1 ' "$shim/calls")"
	grep -q '^RUSTUP_TOOLCHAIN=1.93.1 .*ane_drv.rs' "$shim/calls" ||
		{ echo "ane_drv.rs was not compiled by toolchain 1.93.1" >&2; return 1; }
	if grep -v '^RUSTUP_TOOLCHAIN=1.93.1 ' "$shim/calls" | grep .; then
		echo "the calls above did not select toolchain 1.93.1 (root's default or rustup state used)" >&2
		return 1
	fi
	ls "/var/lib/dkms/ane/$version/$rel/x86_64/module/"ane.ko*
}
step "rustup: a rustup-built kernel (rustc 1.93.1) builds with RUSTUP_TOOLCHAIN=1.93.1, never root's rustup default" rustup_select

rustup_missing() {
	local d
	mk_shim
	d=$(fake_tree 7.3.4-rustup92)
	ln -s "$ANE_KDIR_X86/Module.symvers" "$d/Module.symvers"
	ln -s "$ANE_KDIR_X86/rust" "$d/rust"
	sed -i 's/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT="rustc 1.92.0 (ded5c06cf 2025-12-08)"/' "$d/.config"
	PATH=$shim/bin:$PATH expect_rc nonzero dkms build "ane/$version" -k 7.3.4-rustup92 -a x86_64 \
		--directive "BUILD_EXCLUSIVE_ARCH=^(aarch64|x86_64)\$" || return 1
	on_terminal "rustup has no toolchain 1.92.0 installed" "rustup toolchain install 1.92.0" || return 1
	if grep -qE "rustup default [0-9]" /tmp/dkms-neg.log; then
		echo "the advice still sets root's rustup default" >&2
		return 1
	fi
	grep -q '^RUSTUP_TOOLCHAIN=1.92.0 --version' "$shim/calls"
}
step "rustup: another kernel's toolchain (1.92.0) not installed: the terminal says to install it, no rustup default" rustup_missing

summary "dkms summary"

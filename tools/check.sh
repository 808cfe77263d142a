#!/usr/bin/env bash
# `make check`: every test of the project.
#
# 1. Host: cargo test (and clippy, rustfmt) of the userspace workspace, which
#    includes the shared hardware crate the driver is built from.
# 2. The build chroot and both test kernels (cached by their inputs).
# 3. The module for x86_64 and arm64: production flavour with clippy, modinfo
#    checks; test flavour for the QEMU runs.
# 4. QEMU x86_64 and arm64: in-guest test scripts, kernel log judged clean;
#    the deliberate-warning canary must be caught.
#
# Ends with "N passed, N failed"; exit status 0 only if all steps passed.
source "$(dirname "$0")/lib.sh"
cd "$ANE_TOP"

host_cargo() {
	(cd userspace && cargo clippy --locked --all-targets -- -D warnings && cargo test --locked)
}
step "host: userspace + shared crate (clippy, cargo test)" host_cargo
# One rustfmt for all Rust sources (the kernel toolchain's), so the driver
# and userspace never disagree on formatting.
step "chroot: rustfmt check (kernel toolchain)" in_chroot make fmt-check
# The shared crate and userspace tests again with the kernel's rustc 1.85:
# proves the minimum version, and runs the C-header layout test (the chroot
# has the kernel UAPI headers and a C compiler).
step "chroot: cargo test with rustc 1.85 (UAPI layout vs C header)" \
	in_chroot -w /src/userspace /usr/bin/env ANE_REQUIRE_LAYOUT_TEST=1 \
	CARGO_TARGET_DIR=/cache/cargo-target/host cargo test --locked

kdir_x86=$("$ANE_TOP/tools/kernel/build.sh" x86_64) || die "x86_64 kernel build failed"
kdir_arm=$("$ANE_TOP/tools/kernel/build.sh" arm64) || die "arm64 kernel build failed"

# The production module, linted with clippy, and its modinfo.
prod_module() {
	local arch=$1 kdir=$2 dir
	dir=$(guest_dir "$arch")/prod
	in_chroot /bin/bash -euo pipefail -c '
		arch=$1 kdir=$2 dir=$3
		mkdir -p "$dir"
		rsync -a --delete --exclude=.git --exclude=target /src/ "$dir/"
		make -C "$dir" KDIR="$kdir" ARCH="$arch" CLIPPY=1 modules
		exec /src/tools/modinfo-check.sh "$dir/ane.ko" "$kdir"
	' prod "$arch" "$kdir" "$dir"
}
step "module x86_64: production build, clippy, modinfo" prod_module x86_64 "$kdir_x86"
step "module arm64: production build, clippy, modinfo" prod_module arm64 "$kdir_arm"

# Test flavour + initramfs, then boots.
guest() {
	local arch=$1 kdir=$2
	in_chroot tools/qemu/build-guest.sh "$arch" "$kdir" "$(guest_dir "$arch")"
}
boot() {
	local arch=$1 kdir=$2 tests=$3 tag=$4 dtb=${5:-} g
	g=$(guest_dir "$arch")
	in_chroot tools/qemu/boot.sh "$arch" "$kdir" "$g/initramfs.cpio.gz" "$tests" "$g/$tag.log" $dtb
}
# The canary test makes the kernel warn; the run must be judged FAILED with
# the warning named, or the harness could not see problems at all.
canary() {
	local arch=$1 kdir=$2 out
	if out=$(boot "$arch" "$kdir" warn_canary canary); then
		echo "$out"
		echo "canary: the deliberate WARNING was not detected" >&2
		return 1
	fi
	echo "$out"
	grep -q "WARNING:" <<<"$out" || {
		echo "canary: the run failed, but not because of the WARNING" >&2
		return 1
	}
	echo "canary: deliberate WARNING detected, as it must be"
}
arm_dtb() {
	in_chroot tools/qemu/mkdtb.sh "$(guest_dir arm64)/ane-virt.dtb"
}

step "guest x86_64: test-flavour module + initramfs" guest x86_64 "$kdir_x86"
# One boot per architecture runs the suite: load/unload with no device, the
# simulated device's node and runtime PM, the ioctl suite on the T8103,
# T6001 and T6021 tables (bad-input table, lifecycle, execution of real
# compiled programs against the CPU reference, injected hang and error
# recovery per SoC), unbind with the node held open, the T6021 firmware
# start, calls and fault matrix, and ane-probe's commands; kmemleak scans
# after each.
suite=load_unload,accel_smoke,ioctl,ioctl_t6001,ioctl_t6021,unbind_open,fw_t6021,probe
step "qemu x86_64: load/unload, accel node, ioctl suite (T8103, T6001, T6021), unbind while open, T6021 firmware start, calls and faults, ane-probe (info, parity, mlp, run, bench)" boot x86_64 "$kdir_x86" "$suite" suite
step "qemu x86_64: warning canary caught" canary x86_64 "$kdir_x86"
step "guest arm64: test-flavour module + initramfs" guest arm64 "$kdir_arm"
step "qemu arm64 (16K pages): the same suite" boot arm64 "$kdir_arm" "$suite" suite
step "qemu arm64: dtb with ANE nodes" arm_dtb
step "qemu arm64: modalias load, bind, sysfs unbind/rebind" \
	boot arm64 "$kdir_arm" bind bind "$(guest_dir arm64)/ane-virt.dtb"
step "qemu arm64: warning canary caught" canary arm64 "$kdir_arm"

# Installation: device tree, DKMS, packages (each builds for real in the
# chroot; see the scripts).
step "device tree: overlays, binding, upstream 7.3 boards" tools/dt/check.sh
step "dkms: real add/build against both test kernels" tools/dkms/check.sh
step "packaging: makepkg + rpmbuild, contents" tools/packaging/check.sh

summary

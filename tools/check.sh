#!/usr/bin/env bash
# `make check`: every test of the project.
#
# 1. Host: cargo test (and clippy, rustfmt) of the userspace workspace, which
#    includes the shared hardware crate the driver is built from; the
#    Python package's wheel and its pytest suite on the host engine model.
# 2. The build chroot and the three test kernels (cached by their inputs):
#    x86_64 7.3, arm64 7.3 (rustc 1.85) and arm64 7.2 (backports rustc),
#    all GCC-built like the kernels Asahi users run.
# 3. The module against each: production flavour with clippy, modinfo, no
#    test code; its symbols against the real 7.1.13 target's export list;
#    test flavour for the QEMU runs.
# 4. QEMU x86_64 7.3, arm64 7.3 and arm64 7.2: in-guest test scripts (on
#    x86_64 also the Python package's pytest suite against the simulated
#    device), kernel log judged clean; the deliberate-warning canary must be
#    caught.
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
# The Python package (ane-rs / ane_rs): abi3 wheel built by maturin with
# the same rustc 1.85, clippy on the extension crate, pytest against the
# installed wheel on the host engine model (tools/py/check.sh).
step "chroot: Python wheel (maturin, rustc 1.85) + pytest on the host engine model" \
	tools/py/check.sh

# The test kernels, built like the target (GCC, 16K pages on arm64, 1000 Hz,
# high-resolution timers, PREEMPT): x86_64 and arm64 7.3 with rustc 1.85,
# arm64 7.2 with trixie-backports' rustc (tools/kernel/build.sh).
kdir_x86=$("$ANE_TOP/tools/kernel/build.sh" x86_64 7.3) || die "x86_64 7.3 kernel build failed"
kdir_arm=$("$ANE_TOP/tools/kernel/build.sh" arm64 7.3) || die "arm64 7.3 kernel build failed"
kdir_arm72=$("$ANE_TOP/tools/kernel/build.sh" arm64 7.2) || die "arm64 7.2 kernel build failed"
kdir_san=$("$ANE_TOP/tools/kernel/build.sh" x86_64 7.3 san) || die "x86_64 7.3 sanitizer kernel build failed"

# The production module, linted with clippy where the chroot has the
# kernel's clippy (rustc 1.85), its modinfo, and its text size.
prod_module() {
	local arch=$1 kdir=$2 tag=$3 clippy=$4 dir
	dir=$(guest_dir "$tag")/prod
	in_chroot /bin/bash -euo pipefail -c '
		arch=$1 kdir=$2 dir=$3 clippy=$4
		mkdir -p "$dir"
		rsync -a --delete --exclude=.git --exclude=target /src/ "$dir/"
		kenv() { /src/tools/kernel/with-toolchain.sh "$kdir" "$@"; }
		kenv make -C "$dir" KDIR="$kdir" ARCH="$arch" ${clippy:+CLIPPY=1} modules
		cross=$(kenv sh -c "echo \"\${CROSS_COMPILE:-}\"")
		/src/tools/modinfo-check.sh "$dir/ane.ko" "$kdir"
		# No simulator, engine or firmware model, WARN hook or test
		# parameter in the production module.
		if ${cross}nm "$dir/ane.ko" | grep -E "sim(Engine|Fw|PageTable)|FwModel|TmModel|hw2tm5model|hw6engine|selftest" >&2; then
			echo "prod: test-flavour code in the production module" >&2
			exit 1
		fi
		if modinfo -F parm "$dir/ane.ko" | grep -E "^(sim_|selftest)" >&2; then
			echo "prod: test-flavour parameters in the production module" >&2
			exit 1
		fi
		${cross}size "$dir/ane.ko"
	' prod "$arch" "$kdir" "$dir" "$clippy"
}
step "module x86_64 7.3: production build, clippy, modinfo, no test code" prod_module x86_64 "$kdir_x86" x86_64 1
step "module arm64 7.3 (rustc 1.85): production build, clippy, modinfo, no test code" prod_module arm64 "$kdir_arm" arm64 1
step "module arm64 7.2 (rustc backports): production build, modinfo, no test code" prod_module arm64 "$kdir_arm72" arm64-7.2 ""
# The real target's export list: every symbol the arm64 module needs from
# the kernel exists in linux-asahi 7.1.13 (tools/symcheck.sh).
symbols() {
	local ko symvers=/shared/targets/Module.symvers-7.1.13-3-1-ARCH
	ko=$(guest_dir arm64)/prod/ane.ko
	in_chroot tools/symcheck.sh "$ko" "$symvers" /src/docs/kernel-compat.md || return 1
	# The check must be able to fail: without one C export the module
	# needs, it does.
	in_chroot /bin/bash -c 'grep -vP "\tdrm_dev_register\t" "$2" >/tmp/symvers-minus &&
		! /src/tools/symcheck.sh "$1" /tmp/symvers-minus >/dev/null 2>&1' symcheck "$ko" "$symvers" || {
		echo "symcheck passed without drm_dev_register in the export list" >&2
		return 1
	}
	echo "symcheck: fails as it must when an export is missing"
}
step "symbols: arm64 ane.ko against the linux-asahi 7.1.13 export list" symbols

# Test flavour + initramfs, then boots.
guest() {
	local arch=$1 kdir=$2 tag=$3
	in_chroot /usr/bin/env ANE_CARGO_TARGET="/cache/guest/cargo-$arch" \
		tools/qemu/build-guest.sh "$arch" "$kdir" "$(guest_dir "$tag")"
}
boot() {
	local arch=$1 kdir=$2 tag=$3 tests=$4 log=$5 dtb=${6:-} g
	g=$(guest_dir "$tag")
	in_chroot tools/qemu/boot.sh "$arch" "$kdir" "$g/initramfs.cpio.gz" "$tests" "$g/$log.log" $dtb
}
# The canary test makes the kernel warn (or, on the sanitizer kernel,
# report a KASAN bug); the run must be judged FAILED with the report named,
# or the harness could not see problems at all.
canary() {
	local arch=$1 kdir=$2 tag=$3 test=${4:-warn_canary} what=${5:-WARNING:} out
	if out=$(boot "$arch" "$kdir" "$tag" "$test" canary); then
		echo "$out"
		echo "canary: the deliberate $what was not detected" >&2
		return 1
	fi
	echo "$out"
	grep -q "$what" <<<"$out" || {
		echo "canary: the run failed, but not because of the $what" >&2
		return 1
	}
	echo "canary: deliberate $what detected, as it must be"
}
arm_dtb() {
	in_chroot tools/qemu/mkdtb.sh "$(guest_dir arm64)/ane-virt.dtb"
}

step "guest x86_64 7.3: test-flavour module + initramfs" guest x86_64 "$kdir_x86" x86_64
# One boot per kernel runs the suite: load/unload with no device, the
# simulated device's node and runtime PM, the ioctl suite on the T8103,
# T6001 and T6021 tables (bad-input table, lifecycle, execution of real
# compiled programs against the CPU reference, injected hang and error
# recovery per SoC), unbind with the node held open, the T6021 firmware
# start, calls and fault matrix, and ane-probe's commands; kmemleak scans
# after each. The x86_64 boot also runs the ane_rs pytest suite on the
# device (only the x86_64 initramfs carries Python; the arm64 boots run
# $suite without it).
suite=load_unload,accel_smoke,ioctl,ioctl_irq,ioctl_t6001,ioctl_t6021,suspend,unbind_open,fw_t6021,node_shapes,probe
step "qemu x86_64 7.3: load/unload, accel node, ioctl suite (T8103 polled and by interrupt, T6001, T6021), system sleep with jobs queued, unbind while open, T6021 firmware start, calls and faults, ane-probe (info, parity, mlp, run, bench), ane_rs pytest on the device" \
	boot x86_64 "$kdir_x86" x86_64 "$suite,python" suite
# ane-fuzz (issue 17): a fixed-seed pass of 10^4 ioctls per SoC table from
# 4 processes, canaries and a known-good job after each, kmemleak after the
# unload, and the regressions of what it found. Its own boot (about 4 min
# under TCG) keeps the suite's boots inside their timeout; x86_64 only, the
# arm64 boots run the same driver code slower. make fuzz runs 10^5.
step "qemu x86_64 7.3: ane-fuzz, 10^4 ioctls per SoC table (T8103, T6001, T6021), fixed seed, canaries, known-good job, fuzz regressions" \
	boot x86_64 "$kdir_x86" x86_64 fuzz fuzz
step "qemu x86_64 7.3: warning canary caught" canary x86_64 "$kdir_x86" x86_64
# The sanitizer kernel (KASAN, UBSAN, lockdep, kmemleak, atomic-sleep
# checks, fault injection; clang-built, tools/kernel/sanitizers.config):
# the ioctl suites of every SoC table, unbind while open, the firmware path
# with its faults and the node shapes; the judge fails on any report.
san_suite=ioctl,ioctl_t6001,ioctl_t6021,unbind_open,fw_t6021,node_shapes
step "guest x86_64 7.3 sanitizers: test-flavour module (clang) + initramfs" guest x86_64 "$kdir_san" x86_64-san
step "qemu x86_64 7.3 sanitizers (KASAN, UBSAN, fault injection): ioctl suites (T8103, T6001, T6021), unbind while open, T6021 firmware and faults, node shapes" \
	boot x86_64 "$kdir_san" x86_64-san "$san_suite" suite
# Fault injection on the sanitizer kernel: every driver call with each of
# its fault sites failed in turn (fail_nth: deterministic, the device must
# be released after each), then ane-fuzz with failslab failing 5% of the
# slab allocations made inside the fuzzed ioctls and mmaps (and nowhere
# else): error paths under KASAN, then the same checks as above.
step "qemu x86_64 7.3 sanitizers: every driver call with each fault site failed in turn (fail-nth; T8103, T6021), then ane-fuzz under failslab, every SoC table" \
	boot x86_64 "$kdir_san" x86_64-san fail_nth,fuzz_inject fault_inject
step "qemu x86_64 7.3 sanitizers: KASAN canary caught" canary x86_64 "$kdir_san" x86_64-san kasan_canary "KASAN:"
step "guest arm64 7.3: test-flavour module + initramfs" guest arm64 "$kdir_arm" arm64
step "qemu arm64 7.3 (16K pages): the same suite" boot arm64 "$kdir_arm" arm64 "$suite" suite
step "qemu arm64: dtb with ANE nodes" arm_dtb
step "qemu arm64 7.3: modalias load, bind, sysfs unbind/rebind" \
	boot arm64 "$kdir_arm" arm64 bind bind "$(guest_dir arm64)/ane-virt.dtb"
step "qemu arm64 7.3: warning canary caught" canary arm64 "$kdir_arm" arm64
step "guest arm64 7.2: test-flavour module + initramfs" guest arm64 "$kdir_arm72" arm64-7.2
step "qemu arm64 7.2 (16K pages): the same suite" boot arm64 "$kdir_arm72" arm64-7.2 "$suite" suite
step "qemu arm64 7.2: modalias load, bind, sysfs unbind/rebind" \
	boot arm64 "$kdir_arm72" arm64-7.2 bind bind "$(guest_dir arm64)/ane-virt.dtb"

# Installation: device tree, DKMS, packages (each builds for real in the
# chroot; see the scripts).
step "device tree: overlays, binding, upstream 7.3 boards" tools/dt/check.sh
step "dkms: real add/build against the 7.2 and 7.3 test kernels" tools/dkms/check.sh
# Arch/Omarchy headers ship no rust/: ane-rust-meta rebuilds it; proved end
# to end on a headers tree made like linux-asahi-headers, booting the
# original kernel with the modules built against the result.
step "ane-rust-meta: Rust metadata for headers without rust/, end to end" tools/rustmeta/e2e.sh
# The udev rule against attribute walks of an ane (M1) and an ane-fw (M2
# Pro/Max) node and of devices it must leave alone (tools/udev/check.py).
step "udev rule: ane and ane-fw nodes get render, 0660, uaccess; others nothing" \
	in_chroot python3 tools/udev/check.py
step "packaging: makepkg + rpmbuild, contents" tools/packaging/check.sh

summary

#!/usr/bin/env bash
# The project's tests, in two tiers (README, "Test tiers", says which step
# runs where and why):
#
#   tools/check.sh          make check: the gate CI runs; at most 60 minutes
#                           on 2 cores from an empty cache, measured
#   tools/check.sh full     make check-full: every step, the gate's and the
#                           rest (all kernels and boots, fail-nth, failslab
#                           fuzz, the 10^4-call fuzz)
#
# 1. Host: cargo test (and clippy, rustfmt) of the userspace workspace, which
#    includes the shared hardware crate the driver is built from; the
#    Python package's wheel and its pytest suite on the host engine model.
# 2. The build chroot and the test kernels (cached by their inputs): arm64
#    7.3 (GCC, 16K pages, lockdep, kmemleak: the target's build), x86_64
#    7.3 sanitizers (clang, KASAN, UBSAN, lockdep, kmemleak, fault
#    injection), arm64 7.2 (backports rustc) prepared for modules only in
#    the gate and built whole in the full tier, and in the full tier the
#    GCC-built x86_64 7.3 test kernel.
# 3. The module against each: production flavour with clippy, modinfo, no
#    test code; its symbols against the real 7.1.13 target's export list;
#    test flavour for the QEMU runs.
# 4. QEMU runs: in-guest test scripts (on x86_64 also the Python package's
#    pytest suite against the simulated device), kernel log judged clean;
#    the deliberate-warning and KASAN canaries must be caught. Each run has
#    its own time limit, at least four times what it took on the machine
#    the limits were measured on (README, "Test tiers"), so a machine twice
#    as slow still uses at most half of it; a run that hits its limit is
#    reported as TIMEOUT with the test that was running.
# 5. Installation: device tree, DKMS, ane-rust-meta (on the project's own
#    kernel shaped like Arch's headers, and on Debian's prebuilt kernel),
#    udev, packages.
#
# Every step prints its time; the summary prints each step's and the total.
# Ends with "N passed, N failed"; exit status 0 only if all steps passed.
source "$(dirname "$0")/lib.sh"
cd "$ANE_TOP"

tier=gate
case "${1:-}" in
"" | gate) ;;
full) tier=full ;;
*) die "usage: tools/check.sh [gate|full]" ;;
esac
printf '=== make check%s: tier %s, cache %s, %s cores\n' "${tier#gate}" "$tier" "$ANE_CACHE" "$(nproc)"
[ "$tier" = gate ] || printf '=== (check-full: every step of the gate, then the rest)\n'

# The guest tests and the oracle read the real compiled programs and target
# files from the shared directory (README, "What you need"); without it
# every later step would fail far from the cause, so stop here.
ane_shared=${ANE_SHARED:-$(cd "$ANE_TOP/.." && pwd)/shared}
for d in fixtures targets; do
	[ -d "$ane_shared/$d" ] || die "$ane_shared/$d is missing: clone next to the shared directory (../shared) or set ANE_SHARED to it"
done

# fstep NAME COMMAND...: a step of the full tier only; the gate lists it
# as not run, so its summary shows what make check-full adds.
fstep() {
	if [ "$tier" = full ]; then
		step "$@"
	else
		ANE_RESULTS+=("-     $1 (check-full only)")
	fi
}

host_cargo() {
	(cd userspace && cargo clippy --locked --all-targets -- -D warnings && cargo test --locked)
}
step "host: userspace + shared crate (clippy, cargo test)" host_cargo
# The build chroot (Debian trixie, tools/env/packages.txt), cached by its
# package list: every step below runs in it.
step "chroot: Debian trixie build environment (mmdebstrap)" tools/env/mkchroot.sh
# One rustfmt for all Rust sources (the kernel toolchain's), so the driver
# and userspace never disagree on formatting.
step "chroot: rustfmt check (kernel toolchain)" in_chroot make fmt-check
# The shared crate's tests again with the kernel's rustc 1.85, among them
# the C-header layout test (the chroot has the kernel UAPI headers and a C
# compiler). The rest of the workspace is compiled with rustc 1.85 by the
# guest and wheel builds below (the minimum version); check-full also runs
# all of its tests with it.
if [ "$tier" = full ]; then
	step "chroot: cargo test with rustc 1.85, whole workspace (UAPI layout vs C header)" \
		in_chroot -w /src/userspace /usr/bin/env ANE_REQUIRE_LAYOUT_TEST=1 \
		CARGO_TARGET_DIR=/cache/cargo-target/host cargo test --locked
else
	step "chroot: cargo test with rustc 1.85, shared hardware crate (UAPI layout vs C header)" \
		in_chroot -w /src/userspace /usr/bin/env ANE_REQUIRE_LAYOUT_TEST=1 \
		CARGO_TARGET_DIR=/cache/cargo-target/host cargo test --locked -p ane-hw
fi
# The Python package (ane-rs / ane_rs): abi3 wheel built by maturin with
# the same rustc 1.85, clippy on the extension crate, pytest against the
# installed wheel on the host engine model (tools/py/check.sh).
# The aarch64 wheel (built, checked, not run) in check-full only.
if [ "$tier" = full ]; then
	step "chroot: Python wheels x86_64 and aarch64 (maturin, rustc 1.85) + pytest on the host engine model" \
		tools/py/check.sh
else
	step "chroot: Python wheel x86_64 (maturin, rustc 1.85) + pytest on the host engine model" \
		env ANE_PY_ARM64=0 tools/py/check.sh
fi

# The test kernels, built like the target (GCC, 16K pages on arm64, 1000 Hz,
# high-resolution timers, PREEMPT; tools/kernel/build.sh), as steps so that
# each build's time is printed; a cache hit takes a second.
kernel() { # VAR ARGS...: build (or reuse) a kernel, its KDIR into VAR
	local var=$1 dir
	shift
	dir=$("$ANE_TOP/tools/kernel/build.sh" "$@") || return 1
	printf -v "$var" '%s' "$dir"
	echo "$var=$dir"
}
kdir_arm= kdir_san= kdir_arm72= kdir_x86=
step "kernel arm64 7.3 (GCC, 16K pages, lockdep, kmemleak)" kernel kdir_arm arm64 7.3
step "kernel x86_64 7.3 sanitizers (clang, KASAN, UBSAN, lockdep, kmemleak, fault injection)" \
	kernel kdir_san x86_64 7.3 san
if [ "$tier" = full ]; then
	step "kernel arm64 7.2 (GCC, 16K pages, backports rustc)" kernel kdir_arm72 arm64 7.2
	step "kernel x86_64 7.3 (GCC, lockdep, kmemleak)" kernel kdir_x86 x86_64 7.3
else
	# The gate proves 7.2 by compiling and linking the module against
	# its kernel crate; the full tier builds and boots it.
	step "kernel arm64 7.2 prepared for modules (Rust crates and headers only; backports rustc)" \
		kernel kdir_arm72 arm64 7.2 prep
fi
if [ -z "$kdir_arm" ] || [ -z "$kdir_san" ] || [ -z "$kdir_arm72" ] ||
	{ [ "$tier" = full ] && [ -z "$kdir_x86" ]; }; then
	summary "make check: a kernel failed to build (its log is named above)"
	exit 1
fi

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
# The test flavour alone, for a kernel the gate does not boot.
test_module() {
	local arch=$1 kdir=$2 tag=$3 dir
	dir=$(guest_dir "$tag")/test
	in_chroot /bin/bash -euo pipefail -c '
		arch=$1 kdir=$2 dir=$3
		mkdir -p "$dir"
		rsync -a --delete --exclude=.git --exclude=target /src/ "$dir/"
		/src/tools/kernel/with-toolchain.sh "$kdir" make -C "$dir" KDIR="$kdir" ARCH="$arch" ANE_TEST=1 modules
		ls -l "$dir/ane.ko"
	' test "$arch" "$kdir" "$dir"
}
step "module arm64 7.3 (rustc 1.85): production build, clippy, modinfo, no test code" prod_module arm64 "$kdir_arm" arm64 1
fstep "module x86_64 7.3: production build, clippy, modinfo, no test code" prod_module x86_64 "$kdir_x86" x86_64 1
# 7.2: in the gate, the production module is built by the dkms step below
# (with modinfo) and the test flavour here.
fstep "module arm64 7.2 (rustc backports): production build, modinfo, no test code" prod_module arm64 "$kdir_arm72" arm64-7.2 ""
[ "$tier" = full ] ||
	step "module arm64 7.2 (rustc backports): test flavour compiles and links" test_module arm64 "$kdir_arm72" arm64-7.2
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
# boot ARCH KDIR TAG TESTS LOG LIMIT [DTB]: one QEMU run, bounded by LIMIT
# seconds (exit 124 when it hits it).
boot() {
	local arch=$1 kdir=$2 tag=$3 tests=$4 log=$5 limit=$6 dtb=${7:-} g
	g=$(guest_dir "$tag")
	in_chroot /usr/bin/env ANE_QEMU_TIMEOUT="$limit" \
		tools/qemu/boot.sh "$arch" "$kdir" "$g/initramfs.cpio.gz" "$tests" "$g/$log.log" $dtb
}
# The canary test makes the kernel warn (or, on the sanitizer kernel,
# report a KASAN bug); the run must be judged FAILED with the report named,
# or the harness could not see problems at all.
canary() {
	local arch=$1 kdir=$2 tag=$3 test=${4:-warn_canary} what=${5:-WARNING:} out
	if out=$(boot "$arch" "$kdir" "$tag" "$test" canary 300); then
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

# The suite, split into boots that each stay far inside their limits: the
# module with no device, the node and runtime PM, the ioctl suite on the
# T8103, T6001 and T6021 tables (bad-input table, lifecycle, execution of
# real compiled programs against the CPU reference, injected hang and error
# recovery per SoC), system sleep with jobs queued, unbind with the node
# held open, the T6021 firmware start, calls and fault matrix, the same
# T6021 suites under each alternative the record leaves open (the
# simulator's sim_fw_faults switches, fw_alt_t6021), the node shapes and
# ane-probe's commands; kmemleak scans after each. The sanitizer boot also
# runs the udev rule through the real udevadm (udev, x86_64 initramfs only)
# and the H13 suites under each alternative the record leaves open for the
# task manager (alt_h13: the ack, the pop, the network id, T6001's drain).
suite_a=load_unload,accel_smoke,ioctl,ioctl_irq,ioctl_t6001,suspend
suite_b=ioctl_t6021,unbind_open,open_probe,fw_t6021,fw_alt_t6021,node_shapes,probe,job_timeout,tenancy
# Limits (seconds) are four times or more what each run took on the 2-core
# machine the README's figures come from.
step "guest arm64 7.3: test-flavour module + initramfs" guest arm64 "$kdir_arm" arm64
# The gate's arm64 boot runs what 16K pages and the arm64 build can change:
# the module with no device, the ioctl suites of every SoC table (buffer,
# firmware-memory and page-table sizes), the T6021 firmware path, the node
# shapes and system sleep; the rest of the suite runs on the sanitizer
# kernel in the gate and on arm64 too in check-full.
suite_arm_gate=load_unload,ioctl,ioctl_t6001,ioctl_t6021,fw_t6021,node_shapes,suspend
if [ "$tier" = full ]; then
	step "qemu arm64 7.3 (16K pages) 1/2: $suite_a" boot arm64 "$kdir_arm" arm64 "$suite_a" suite-a 1200
	step "qemu arm64 7.3 (16K pages) 2/2: $suite_b" boot arm64 "$kdir_arm" arm64 "$suite_b" suite-b 1200
else
	step "qemu arm64 7.3 (16K pages): $suite_arm_gate" boot arm64 "$kdir_arm" arm64 "$suite_arm_gate" suite 1200
fi
step "qemu arm64: dtb with ANE nodes" arm_dtb
step "qemu arm64 7.3: modalias load, bind, sysfs unbind/rebind" \
	boot arm64 "$kdir_arm" arm64 bind bind 600 "$(guest_dir arm64)/ane-virt.dtb"
step "qemu arm64 7.3: warning canary caught" canary arm64 "$kdir_arm" arm64

# The sanitizer kernel (KASAN, UBSAN, lockdep, kmemleak, atomic-sleep
# checks, fault injection; clang-built, tools/kernel/sanitizers.config):
# the same suite, the ane_rs pytest suite on the device (only the x86_64
# initramfs carries Python) and a short ane-fuzz pass; the judge fails on
# any report.
step "guest x86_64 7.3 sanitizers: test-flavour module (clang) + initramfs" guest x86_64 "$kdir_san" x86_64-san
# The four boots and the canary in two lanes side by side (tools/steps.sh):
# each QEMU run mostly waits on one emulated CPU, so on 2 cores the pair
# takes about as long as the longer lane. The device-tree check, which
# needs no kernel, joins the shorter lane.
san_lane_1() {
	step "qemu x86_64 7.3 sanitizers 1/4: $suite_a,udev,alt_h13" boot x86_64 "$kdir_san" x86_64-san "$suite_a,udev,alt_h13" suite-a 1800
	step "qemu x86_64 7.3 sanitizers 3/4: ane_rs pytest on the device, ONNX models compiled and run through the driver, ane-fuzz 10^3 calls per SoC table" \
		boot x86_64 "$kdir_san" x86_64-san python,demo,fuzz_short python-fuzz 1200
	step "qemu x86_64 7.3 sanitizers: KASAN canary caught" canary x86_64 "$kdir_san" x86_64-san kasan_canary "KASAN:"
}
san_lane_2() {
	# memcg: only the sanitizer kernel has CONFIG_MEMCG (as the target).
	step "qemu x86_64 7.3 sanitizers 2/4: $suite_b,memcg" boot x86_64 "$kdir_san" x86_64-san "$suite_b,memcg" suite-b 1800
	# The hostile-client pass (issue 26): hostile processes beside one
	# client whose every job must end DONE and exact, on every SoC table.
	step "qemu x86_64 7.3 sanitizers 4/4: hostile clients beside a well-behaved one (1500 hostile calls per SoC table)" \
		boot x86_64 "$kdir_san" x86_64-san hostile_short hostile 1800
	step "device tree: overlays, binding, upstream 7.3 boards" tools/dt/check.sh
}
side_by_side san_lane_1 san_lane_2
# Fault injection on the sanitizer kernel: every driver call with each of
# its fault sites failed in turn (fail_nth: deterministic, the device must
# be released after each), then ane-fuzz with failslab failing 5% of the
# slab allocations made inside the fuzzed ioctls and mmaps (and nowhere
# else): error paths under KASAN, then the same checks as above. One boot
# each.
fstep "qemu x86_64 7.3 sanitizers: every driver call with each fault site failed in turn (fail-nth; T8103, T6021)" \
	boot x86_64 "$kdir_san" x86_64-san fail_nth fail-nth 2400
fstep "qemu x86_64 7.3 sanitizers: ane-fuzz under failslab, every SoC table" \
	boot x86_64 "$kdir_san" x86_64-san fuzz_inject fuzz-inject 2400

# The full tier: the GCC-built x86_64 kernel (the suite with the pytest
# suite, the 10^4-call fuzz, the warning canary) and the whole 7.2 kernel
# booted.
fstep "guest x86_64 7.3: test-flavour module + initramfs" guest x86_64 "$kdir_x86" x86_64
fstep "qemu x86_64 7.3 1/2: $suite_a,python" boot x86_64 "$kdir_x86" x86_64 "$suite_a,python" suite-a 1200
fstep "qemu x86_64 7.3 2/2: $suite_b" boot x86_64 "$kdir_x86" x86_64 "$suite_b" suite-b 1200
# ane-fuzz (issue 17): a fixed-seed pass of 10^4 ioctls per SoC table from
# 4 processes, canaries and a known-good job after each, kmemleak after the
# unload, and the regressions of what it found. make fuzz runs 10^5.
fstep "qemu x86_64 7.3: ane-fuzz, 10^4 ioctls per SoC table (T8103, T6001, T6021), fixed seed, canaries, known-good job, fuzz regressions" \
	boot x86_64 "$kdir_x86" x86_64 fuzz fuzz 2400
fstep "qemu x86_64 7.3: warning canary caught" canary x86_64 "$kdir_x86" x86_64
fstep "guest arm64 7.2: test-flavour module + initramfs" guest arm64 "$kdir_arm72" arm64-7.2
fstep "qemu arm64 7.2 (16K pages) 1/2: $suite_a" boot arm64 "$kdir_arm72" arm64-7.2 "$suite_a" suite-a 1200
fstep "qemu arm64 7.2 (16K pages) 2/2: $suite_b" boot arm64 "$kdir_arm72" arm64-7.2 "$suite_b" suite-b 1200
fstep "qemu arm64 7.2: modalias load, bind, sysfs unbind/rebind" \
	boot arm64 "$kdir_arm72" arm64-7.2 bind bind 600 "$(guest_dir arm64)/ane-virt.dtb"

# Installation: device tree, DKMS, packages (each builds for real in the
# chroot; see the scripts).
# (the overlay and binding check ran beside the sanitizer boots above)
# ane-dt run as docs/install.md says in roots shaped like Arch Linux ARM,
# Omarchy (ALARM's update-m1n1 with omarchy-mac-boot's hook), Fedora Asahi Remix and upstream asahi-scripts, then each distribution's own
# update-m1n1 (../shared/targets/distro-scripts): the ANE node must be in
# the board's tree of the payload, through a kernel upgrade and an exact
# remove.
step "device tree: ane-dt against Arch Linux ARM's, Omarchy's, Fedora's and upstream's own update-m1n1 (payload split, ANE node in the board's tree, kernel upgrade, exact remove)" tools/dt/distros.sh
# DKMS against the kernels this tier built: arm64 7.3 and 7.2 (GCC) and the
# x86_64 sanitizer kernel (clang: DKMS must add LLVM=1).
step "dkms: real add/build against the arm64 7.3 and 7.2 and the x86_64 (clang) kernels" \
	env ANE_KDIR_ARM="$kdir_arm" ANE_KDIR_ARM72="$kdir_arm72" ANE_KDIR_X86="$kdir_san" tools/dkms/check.sh
# The pacman hooks that rebuild the Rust metadata when a kernel is
# installed or updated on Arch/Omarchy, run by a real pacman in an
# Arch-shaped root without network: ordered before dkms's hook, the offline
# message, updates and removals leave nothing behind.
step "ane-rust-meta pacman hooks: real pacman in an Arch-shaped root without network (before dkms's hook, offline message, kernel update and removal leave nothing)" tools/rustmeta/hook-check.sh
# Arch/Omarchy headers ship no rust/: ane-rust-meta rebuilds it; proved end
# to end on a headers tree made like linux-asahi-headers, booting the
# original kernel with the modules built against the result.
fstep "ane-rust-meta: Rust metadata for headers without rust/, end to end" tools/rustmeta/e2e.sh
# The same tool on a kernel nobody here built: Debian's own prebuilt amd64
# 7.3 kernel (trixie-backports, GCC 14, rustc 1.85.1, headers without
# rust/): metadata rebuilt from Debian's linux-source, a Rust module built
# against Debian's headers and loaded by Debian's own kernel in QEMU, and
# the refusals (another rustc; a header copy that differs from the source).
# The ane driver itself cannot be built there (Debian builds DRM as a
# module, and the kernel crate's DRM API needs CONFIG_DRM=y): kdir-check
# must refuse it by name.
step "ane-rust-meta on Debian's own prebuilt 7.3 kernel: metadata, module built and loaded by Debian's kernel in QEMU, refusals" \
	tools/rustmeta/debian.sh
step "packaging: makepkg + rpmbuild, contents" tools/packaging/check.sh

summary "make check${tier#gate}"

#!/bin/bash
# Inside the chroot: boot a test kernel under QEMU (TCG), run in-guest tests,
# and judge the run from the serial log.
#
#   boot.sh ARCH KDIR INITRAMFS TESTS LOG [DTB]
#
# TESTS is a comma-separated list of tools/qemu/tests/*.sh names. Exit status
# 0 only when every test passed AND the kernel log shows no problem (a
# warning, BUG, oops, lockdep splat, kmemleak report, sanitizer report,
# panic, stall); 124 when the run hit its time limit (tools/qemu/judge.sh
# names the test that was running); 1 otherwise. The run is bounded by
# ANE_QEMU_TIMEOUT seconds (tools/check.sh sets it per run, at least four
# times what the run takes on the machine the limits were measured on, so
# that a machine twice as slow uses at most half of it).
set -euo pipefail
arch=$1 kdir=$2 initrd=$3 tests=$4 log=$5 dtb=${6:-}
timeout_s=${ANE_QEMU_TIMEOUT:-600}

# ANE_QEMU_MEM: guest RAM in MiB (`make bench` needs room for a
# Parakeet-size program twice: the caller's BO and the kernel's copy).
common=(-m "${ANE_QEMU_MEM:-1024}" -nographic -no-reboot -initrd "$initrd")
append="panic=-1 anetest=$tests"
# ANE_QEMU_ICOUNT=1 (`make bench`): the guest's clock counts instructions
# (shift=0: one nanosecond per instruction; sleep=off: idle time skips to
# the next timer instead of following the host's clock) on one vCPU, so a
# guest timing is an instruction count, the same on every run and machine.
# The guest sees `anebench=icount` on its command line.
# Nothing of the host may reach the guest either: -seed makes the guest's
# random numbers (RDRAND, so KASLR, ASLR and every kernel random) the same
# on every run, and the RTC starts at a fixed date and runs on the virtual
# clock (with the host's clock, how long the boot waits for the RTC's
# update cycle followed the host, which moved every later timer tick).
if [ "${ANE_QEMU_ICOUNT:-0}" = 1 ]; then
	common+=(-smp 1 -icount shift=0,sleep=off,align=off -seed 1
		-rtc base=2026-01-01T00:00:00,clock=vm)
	append="$append anebench=icount"
else
	common+=(-smp 2)
fi
case "$arch" in
x86_64)
	# no_timer_check: the kernel's check that the IO-APIC timer ticks
	# during early boot panics ("IO-APIC + timer doesn't work!") when the
	# emulated CPU is starved, as it was on a loaded machine; emulated
	# hardware needs no such check, and a run must not hinge on the
	# machine's speed.
	cmd=(qemu-system-x86_64 -M pc -cpu max "${common[@]}"
		-kernel "$kdir/arch/x86/boot/bzImage" -append "console=ttyS0 no_timer_check $append")
	;;
arm64)
	cmd=(qemu-system-aarch64 -M virt -cpu max "${common[@]}"
		-kernel "$kdir/arch/arm64/boot/Image" -append "console=ttyAMA0 $append")
	[ -z "$dtb" ] || cmd+=(-dtb "$dtb")
	;;
*) echo "boot: unknown arch $arch" >&2; exit 2 ;;
esac

start=$(date +%s)
rc=0
timeout --foreground -k 10 "$timeout_s" "${cmd[@]}" </dev/null >"$log" 2>&1 || rc=$?
secs=$(($(date +%s) - start))
# Strip the carriage returns of the serial console.
sed -i 's/\r$//' "$log"

exec "$(dirname "$0")/judge.sh" "$log" "$tests" "$rc" "$secs" "$arch" "$timeout_s"

#!/usr/bin/env bash
# `make fuzz`: ane-fuzz at 10^5 ioctls per SoC table (T8103, T6001, T6021),
# then its hostile-client mode at 10^5 hostile calls per SoC table
# (hostile_long.sh), in one QEMU x86_64 run on the sanitizer kernel (KASAN, UBSAN, lockdep,
# kmemleak; tools/kernel/sanitizers.config), judged like every CI boot
# (tools/qemu/tests/fuzz_long.sh), then the counts (calls by ioctl and
# outcome, per SoC) from its log. FUZZ_INJECT=1 makes it the failslab run
# of fuzz_inject.sh at the same scale instead. FUZZ_SEED is not
# passed into the guest: edit fuzz.sh's default to change it; a failing
# child prints its own seed and a --fuzz-child line to replay it alone.
# Exit status: the run's.
source "$(dirname "$0")/lib.sh"
cd "$ANE_TOP" || exit 1
kdir=$("$ANE_TOP/tools/kernel/build.sh" x86_64 7.3 san) || die "kernel build failed"
g=$(guest_dir x86_64-san)
suite=fuzz_long,hostile_long
[ "${FUZZ_INJECT:-0}" = 1 ] && suite=fuzz_long_inject
in_chroot /usr/bin/env ANE_CARGO_TARGET=/cache/guest/cargo-x86_64 \
	tools/qemu/build-guest.sh x86_64 "$kdir" "$g" >/dev/null
rc=0
in_chroot /usr/bin/env ANE_QEMU_TIMEOUT="${ANE_QEMU_TIMEOUT:-5400}" \
	tools/qemu/boot.sh x86_64 "$kdir" "$g/initramfs.cpio.gz" "$suite" "$g/fuzz.log" || rc=$?
log="$ANE_CACHE/${g#/cache/}/fuzz.log"
grep -vE '^(FUZZCOUNT|FUZZJOB|\[)' "$log" | grep -E -A15 '^(fuzz:|all processes|jobs ended|HOSTILE|PASS|FAIL|XFAIL|SKIP|UNEXPECTED|kmemleak)' |
	grep -vE '^child [0-9]' || true
exit $rc

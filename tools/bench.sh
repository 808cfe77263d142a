#!/usr/bin/env bash
# `make bench`: benchmarks, printed, never pass/fail.
#
# - In one QEMU x86_64 run on the simulated T8103 with program execution
#   switched off: null ioctl vs EXEC+WAIT with the kernel's breakdown of
#   the round trip, polled and with the opt-in interrupt, and a 256 MiB BO
#   create/map/free (tools/qemu/tests/bench.sh). The kernel is the bench
#   flavour of the x86_64 test kernel: built like the target, without the
#   test kernels' debug checkers (tools/kernel/bench.config).
# - On the host: `cargo bench` of the userspace library (tiling against
#   memcpy, fp16 conversion; per model of the compiler's zoo: compile
#   time, programs, TDs, engine passes on the host engine model).
# QEMU runs under TCG: absolute times are the emulator's, ratios are what
# carries over; run `ane-bench` on a Mac for real numbers.
source "$(dirname "$0")/lib.sh"
cd "$ANE_TOP"
kdir=$("$ANE_TOP/tools/kernel/build.sh" x86_64 7.3 bench) || die "kernel build failed"
g=$(guest_dir x86_64-bench)
in_chroot tools/qemu/build-guest.sh x86_64 "$kdir" "$g" >/dev/null
in_chroot tools/qemu/boot.sh x86_64 "$kdir" "$g/initramfs.cpio.gz" bench "$g/bench.log" >/dev/null || true
echo "--- QEMU x86_64 (TCG), simulated T8103"
grep -E '^(bench:|null ioctl|exec\+wait|ratio|simulated|256 MiB)' "$ANE_CACHE/${g#/cache/}/bench.log"
echo "--- host: userspace library"
(cd userspace && cargo bench --quiet -p ane 2>/dev/null | grep -v '^$' || echo "(no host benchmarks)")

#!/usr/bin/env bash
# `make bench`: benchmarks, printed, never pass/fail.
#
# - In QEMU x86_64 on the simulated T8103 with program execution switched
#   off (tools/qemu/tests/bench.sh, userspace/ane-tests/src/bench.rs):
#   null ioctl vs EXEC+WAIT, polled and with the opt-in interrupt, with
#   the phases of the round trip, the simulator's register reads and
#   writes, wake-ups and context switches per job, throughput with 1 and
#   4 clients, and a 256 MiB BO create/map/free. The kernel is the bench
#   flavour of the x86_64 test kernel: built like the target, without the
#   test kernels' debug checkers (tools/kernel/bench.config).
#   1. Counted: the guest's clock counts instructions (QEMU `-icount
#      shift=0,sleep=off`, one vCPU; tools/qemu/boot.sh): every figure is
#      an instruction count or a count of events. Nothing of the host
#      reaches the guest (a fixed `-seed` for its random numbers, the RTC
#      at a fixed date on the virtual clock), so two runs print the same
#      figures, and the same serial log to the last timestamp.
#      ANE_BENCH_RUNS=2 boots twice and prints any difference.
#   2. Timed: the same run under TCG's real-time clock, for its time
#      ratios only (the figures kept from before the counted run).
# - On the host: `cargo bench` of the userspace library (tiling against
#   memcpy, fp16 conversion; per model of the compiler's zoo: compile
#   time, programs, TDs, engine passes on the host engine model).
source "$(dirname "$0")/lib.sh"
cd "$ANE_TOP"
kdir=$("$ANE_TOP/tools/kernel/build.sh" x86_64 7.3 bench) || die "kernel build failed"
# ANE_BENCH_TAG: a guest directory of its own (several worktrees at once).
g=$(guest_dir "x86_64-bench${ANE_BENCH_TAG:+-$ANE_BENCH_TAG}")
in_chroot tools/qemu/build-guest.sh x86_64 "$kdir" "$g" >/dev/null
figures='^(bench:|null ioctl|clock read|exec\+wait|ratio|registers|wake-ups|throughput|simulated|mlp chain|add\+relu|parakeet|256 MiB)'
runs=${ANE_BENCH_RUNS:-1}
for i in $(seq 1 "$runs"); do
	in_chroot /usr/bin/env ANE_QEMU_ICOUNT=1 ANE_QEMU_TIMEOUT=3600 ANE_QEMU_MEM=2048 \
		tools/qemu/boot.sh x86_64 "$kdir" "$g/initramfs.cpio.gz" bench "$g/bench-icount-$i.log" >/dev/null || true
	echo "--- QEMU x86_64, instruction-counting clock (1 ns = 1 instruction), simulated T8103, run $i"
	grep -E "$figures" "$ANE_CACHE/${g#/cache/}/bench-icount-$i.log" | tee "$ANE_CACHE/${g#/cache/}/bench-icount-$i.figures"
done
if [ "$runs" -gt 1 ]; then
	# Every line is a count (the BO's durations too: the guest clock).
	if diff "$ANE_CACHE/${g#/cache/}/bench-icount-1.figures" \
		"$ANE_CACHE/${g#/cache/}/bench-icount-$runs.figures" >/dev/null; then
		echo "--- runs 1 and $runs print the same counts"
	else
		echo "--- runs 1 and $runs DIFFER:"
		diff "$ANE_CACHE/${g#/cache/}/bench-icount-1.figures" "$ANE_CACHE/${g#/cache/}/bench-icount-$runs.figures" || true
	fi
fi
in_chroot /usr/bin/env ANE_QEMU_MEM=2048 \
	tools/qemu/boot.sh x86_64 "$kdir" "$g/initramfs.cpio.gz" bench "$g/bench.log" >/dev/null || true
echo "--- QEMU x86_64 (TCG, real time), simulated T8103: time ratios"
grep -E '^(bench:|null ioctl|exec\+wait round|ratio|mlp chain|add\+relu|parakeet)' "$ANE_CACHE/${g#/cache/}/bench.log"
echo "--- host: userspace library"
(cd userspace && cargo bench --quiet -p ane 2>/dev/null | grep -v '^$' || echo "(no host benchmarks)")

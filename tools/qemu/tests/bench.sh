# Benchmarks (not a test): see userspace/ane-tests/src/bench.rs. The
# simulated T8103 with program execution switched off (pushed jobs finish at
# once), so EXEC+WAIT measures the driver: first polled (the default), then
# with the opt-in completion interrupt.
#
# `make bench` boots the bench kernel (tools/kernel/bench.config): built
# like the target, without the test kernels' lockdep and kmemleak, which
# under TCG cost more than the driver's own work. With `anebench=icount` on
# the command line (tools/qemu/boot.sh, ANE_QEMU_ICOUNT=1) the guest clock
# counts instructions and the figures are counts. The first line says
# which kernel ran and how time was counted.
echo "bench: kernel $(uname -r), lockdep $([ -e /proc/lockdep ] && echo on || echo off), kmemleak $([ -e /sys/kernel/debug/kmemleak ] && echo on || echo off), clock ${anebench:-real time}"
export ANE_BENCH_CLOCK="${anebench:-}"
modprobe ane sim_soc=0x8103 bo_total_mb=1536
echo 0 > /sys/kernel/debug/ane-sim/exec
ANE_BENCH_MODE=polled ane-bench
modprobe -r ane
modprobe ane sim_soc=0x8103 bo_total_mb=1536 completion_irq=1 sim_irq=1
echo 0 > /sys/kernel/debug/ane-sim/exec
ANE_BENCH_MODE=interrupt ane-bench
modprobe -r ane

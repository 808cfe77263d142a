# Benchmarks (not a test): see userspace/ane-tests/src/bench.rs. The
# simulated T8103 with program execution switched off (pushed jobs finish at
# once), so EXEC+WAIT measures the driver: first polled (the default), then
# with the opt-in completion interrupt.
#
# The test kernel's checkers are switched off for this boot first: kmemleak
# records a stack trace per allocation and lockdep validates every lock
# taken, each costing more under TCG than the driver's own work (the target
# kernel has neither). The null ioctl is measured under the same kernel.
p=/sys/module/lockdep/parameters/prove_locking
if [ -w $p ]; then echo 0 > $p; fi
leak=absent
if [ -e /sys/kernel/debug/kmemleak ] && echo off > /sys/kernel/debug/kmemleak; then leak=off; fi
echo "bench: lockdep validation $(cat $p 2>/dev/null || echo absent), kmemleak $leak"
modprobe ane sim_soc=0x8103 bo_total_mb=512
echo 0 > /sys/kernel/debug/ane-sim/exec
ANE_BENCH_MODE=polled ane-bench
modprobe -r ane
modprobe ane sim_soc=0x8103 bo_total_mb=512 completion_irq=1 sim_irq=1
echo 0 > /sys/kernel/debug/ane-sim/exec
ANE_BENCH_MODE=interrupt ane-bench
modprobe -r ane

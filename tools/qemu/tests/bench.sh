# Benchmarks (not a test): see userspace/ane-tests/src/bench.rs. The
# simulated T8103 with program execution switched off (pushed jobs finish at
# once), so EXEC+WAIT measures the driver: first polled (the default), then
# with the opt-in completion interrupt.
modprobe ane sim_soc=0x8103 bo_total_mb=512
echo 0 > /sys/kernel/debug/ane-sim/exec
ANE_BENCH_MODE=polled ane-bench
modprobe -r ane
modprobe ane sim_soc=0x8103 bo_total_mb=512 completion_irq=1 sim_irq=1
echo 0 > /sys/kernel/debug/ane-sim/exec
ANE_BENCH_MODE=interrupt ane-bench
modprobe -r ane

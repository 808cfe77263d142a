# Benchmark (not a test, never in a gate list): the Parakeet-size
# PROGRAM_CREATE of `make bench` alone (userspace/ane-tests/src/workloads.rs),
# for a quick local run; boot with ANE_QEMU_ICOUNT=1 for counted figures.
echo "bench: kernel $(uname -r), clock ${anebench:-real time}, string-copy CPU flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -x -e rep_good -e erms -e fsrm | tr '\n' ' ')"
export ANE_BENCH_CLOCK="${anebench:-}" ANE_BENCH_ONLY=parakeet
modprobe ane sim_soc=0x8103 bo_total_mb=1536
echo 0 > /sys/kernel/debug/ane-sim/exec
ane-bench
modprobe -r ane

# Benchmarks (not a test): see userspace/ane-tests/src/bench.rs.
modprobe ane sim_soc=0x8103 bo_total_mb=512
ane-bench
modprobe -r ane

# The ioctl suite against a simulated ANE. SIM_SOC picks the SoC table
# (default T8103); the device cap is lowered so the cap test is quick.
modprobe ane sim_soc="${SIM_SOC:-0x8103}" bo_total_mb=64 autosuspend_ms=200
[ -c /dev/accel/accel0 ] || fail "no accel node"
ane-ioctl-tests
modprobe -r ane
kmemleak_scan

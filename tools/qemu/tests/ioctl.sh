# The ioctl suite against a simulated ANE. SIM_SOC picks the SoC table
# (default T8103), SIM_IRQ whether the simulated engine signals completion by
# interrupt (default yes; 0 exercises the polling path); the device cap is
# lowered so the cap test is quick.
modprobe ane sim_soc="${SIM_SOC:-0x8103}" sim_irq="${SIM_IRQ:-1}" bo_total_mb=64 autosuspend_ms=200
[ -c /dev/accel/accel0 ] || fail "no accel node"
ANE_EXPECT_IRQ="${SIM_IRQ:-1}" ane-ioctl-tests
for what in ${WEDGE_TESTS:-}; do
	ane-ioctl-tests --wedge "$what"
done
modprobe -r ane
kmemleak_scan

# The ioctl suite against a simulated ANE. SIM_SOC picks the SoC table
# (default T8103), COMPLETION_IRQ whether the driver also waits for the
# engine's completion interrupt (default no: polling, as the references
# shipped; 1 routes the simulated event interrupt to the engine's own line
# so the opt-in path runs); the device and per-file caps are lowered so the
# cap test is quick.
irq=${COMPLETION_IRQ:-0}
modprobe ane sim_soc="${SIM_SOC:-0x8103}" completion_irq="$irq" sim_irq="$irq" \
	bo_total_mb=64 bo_client_mb=32 autosuspend_ms=200
[ -c /dev/accel/accel0 ] || fail "no accel node"
ANE_EXPECT_IRQ="$irq" ane-ioctl-tests
for what in ${WEDGE_TESTS:-}; do
	ane-ioctl-tests --wedge "$what"
done
modprobe -r ane
kmemleak_scan

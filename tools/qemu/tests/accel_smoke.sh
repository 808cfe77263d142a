# The simulated T8103 binds, its accel node appears (DRM name "ane_accel") in
# sysfs, runtime PM autosuspends it, and everything unloads cleanly.
modprobe ane sim_soc=0x8103
expect_eq "bound devices" "$(bound_count)" 1
[ -c /dev/accel/accel0 ] || fail "no /dev/accel/accel0"
dmesg | grep -q "ane ane.0: Apple Neural Engine: T8103 (M1), H13, HostDriven backend, completion by polling, simulated" ||
	fail "no probe message"
ane-probe info
sleep 2
expect_eq "runtime PM after idle" "$(cat /sys/bus/platform/devices/ane.0/power/runtime_status)" suspended
modprobe -r ane
[ ! -e /dev/accel/accel0 ] || fail "accel node still there"
kmemleak_scan

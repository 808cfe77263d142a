# kernel-2 N15 (old 1.19): an open that lands while the device is still in
# its probe (the accel node exists, runtime PM is not enabled yet) succeeds;
# it used to fail with EACCES from pm_runtime_resume_and_get(). The test
# flavour's sim_probe_delay_ms holds that window open (10 s: a loaded
# emulated guest is slow to fork).
# A test before may have failed with the module loaded.
! module_loaded || modprobe -r ane
modprobe ane sim_soc=0x8103 sim_probe_delay_ms=10000 &
mp=$!
i=0
until [ -c /dev/accel/accel0 ]; do
	i=$((i + 1))
	[ $i -lt 800 ] || break
	sleep 0.01
done
why=
if [ ! -c /dev/accel/accel0 ]; then
	why="no accel node during probe"
elif ! kill -0 $mp 2>/dev/null; then
	why="probe ended before the open: the window was missed"
elif ! err=$( (exec 3</dev/accel/accel0) 2>&1); then
	why="open during probe: ${err:-failed}"
elif ! kill -0 $mp 2>/dev/null; then
	why="probe ended before the open returned: the window was missed"
fi
# Leave nothing behind for the next test, whatever happened.
wait $mp || why="${why:+$why; }modprobe failed"
if [ -z "$why" ]; then
	echo "open during probe: ok"
	err=$( (exec 3</dev/accel/accel0) 2>&1) || why="open after probe: ${err:-failed}"
fi
modprobe -r ane
[ -z "$why" ] || fail "$why"
kmemleak_scan

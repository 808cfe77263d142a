# kernel-2 N15 (old 1.19): an open that lands while the device is still in
# its probe (the accel node exists, runtime PM is not enabled yet) succeeds;
# it used to fail with EACCES from pm_runtime_resume_and_get(). The test
# flavour's sim_probe_delay_ms holds that window open.
modprobe ane sim_soc=0x8103 sim_probe_delay_ms=3000 &
mp=$!
i=0
until [ -c /dev/accel/accel0 ]; do
	i=$((i + 1))
	[ $i -lt 250 ] || fail "no accel node during probe"
	sleep 0.01
done
kill -0 $mp 2>/dev/null || fail "probe ended before the open: the window was missed"
err=$( (exec 3</dev/accel/accel0) 2>&1) || fail "open during probe: ${err:-failed}"
kill -0 $mp 2>/dev/null || fail "probe ended before the open returned: the window was missed"
echo "open during probe: ok"
wait $mp || fail "modprobe failed"
err=$( (exec 3</dev/accel/accel0) 2>&1) || fail "open after probe: ${err:-failed}"
modprobe -r ane
kmemleak_scan

# System sleep while jobs are queued (the simulated T8103, then T6001): the
# driver lets the running job end, keeps the rest queued while the devices
# are suspended (pm_test=devices), and runs them after resume. The
# simulator fails the run on any engine access while powered down.
for soc in 0x8103 0x6001; do
	modprobe ane sim_soc=$soc autosuspend_ms=200
	ane-ioctl-tests --suspend
	modprobe -r ane
done
kmemleak_scan

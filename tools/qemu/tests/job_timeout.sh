# kernel-2 U6: the H13 job timeout is the administrator's (job_timeout_ms,
# 10..=60000, default 2000), not a constant. A hung job under a 100 ms
# limit ends TIMEOUT well before the default's 2 s would have passed; a
# value outside the range is refused at bind with a message naming it.
! module_loaded || modprobe -r ane
modprobe ane sim_soc=0x8103 job_timeout_ms=100
[ -c /dev/accel/accel0 ] || fail "no accel node with job_timeout_ms=100"
# 100 ms of limit, the rest is the recovery on a slow emulated CPU.
ane-ioctl-tests --hung-job 1500 || fail "hung job under job_timeout_ms=100"
modprobe -r ane
for bad in 0 9 60001; do
	dmesg -c >/dev/null
	modprobe ane sim_soc=0x8103 job_timeout_ms=$bad
	[ ! -e /dev/accel/accel0 ] || fail "job_timeout_ms=$bad: the device bound"
	dmesg | grep -q "job_timeout_ms=$bad is outside 10..=60000" ||
		fail "job_timeout_ms=$bad: no message naming the parameter"
	modprobe -r ane
done
echo "job_timeout_ms: 0, 9 and 60001 refused at bind"
kmemleak_scan

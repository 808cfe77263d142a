# ane-fuzz's hostile-client mode (issue 26, item 8): hostile processes
# (two fuzz children, a submission flood, an open/close and mmap storm, an
# allocation exhaustion; all but the fuzz children unprivileged) beside
# one well-behaved client that checks every result exactly, on each
# simulated SoC table, with a system sleep cycle in the middle on the H13
# tables. Prints one HOSTILE row per SoC (the good client's DONE and exact
# rates, its p50/p99 round trip alone and under the load, the device state
# and the bytes free to a new client before and after); fails on any good
# job not exact, a wedged or quarantined device, bytes kept, an unexpected
# hostile outcome, and kmemleak after the unload.
#
# HOSTILE_CALLS (default 10^4 per SoC table: check-full), HOSTILE_SEED,
# HOSTILE_SOCS can be set by a suite that sources this one.
mkdir -p /lib/firmware/apple/ane
ane-ioctl-tests --write-fw-image /lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho
seed=${HOSTILE_SEED:-0x26}
bad=
calls=${HOSTILE_CALLS:-10000}
for soc in ${HOSTILE_SOCS:-0x8103 0x6001 0x6021}; do
	modprobe ane sim_soc="$soc" bo_total_mb=64 bo_client_mb=32 autosuspend_ms=200
	[ -c /dev/accel/accel0 ] || fail "$soc: no accel node"
	start=$(date +%s)
	sleeper=
	if [ "$soc" != 0x6021 ] && [ -w /sys/power/state ]; then
		(
			sleep 3
			echo devices > /sys/power/pm_test
			rc=0
			echo freeze > /sys/power/state || rc=$?
			echo none > /sys/power/pm_test
			echo "hostile: system sleep cycle during the run on $soc: rc=$rc"
			exit $rc
		) &
		sleeper=$!
	fi
	rc=0
	ane-ioctl-tests --hostile "$seed" "$calls" || rc=$?
	if [ -n "$sleeper" ]; then
		wait "$sleeper" || rc=1
	fi
	# Every SoC's row is printed; the run fails at the end.
	[ "$rc" = 0 ] || bad="$bad $soc"
	echo "hostile: sim_soc=$soc: $calls hostile calls in $(($(date +%s) - start)) s"
	modprobe -r ane
	kmemleak_scan
done
[ -z "$bad" ] || fail "hostile-client run failed on:$bad (seed $seed)"

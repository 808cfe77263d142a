# ane-fuzz (issue 17, point 2): the structure-aware ioctl fuzzer of
# ane-ioctl-tests against each simulated SoC table: 4 processes at once,
# with a system sleep cycle in the middle on the H13 tables,
# a fixed seed (printed with each process's own seed, for replay), counts
# by ioctl and outcome printed. A child killed by a signal, an errno
# outside the documented set, a success where the call had to fail, a
# changed canary BO, a wrong known-good job after the run, or a kmemleak
# report after the unload fails it.
#
# FUZZ_CALLS (default 10^4 per SoC table), FUZZ_SEED and FUZZ_SOCS can be
# set by a suite that sources this one (fuzz_long.sh: make fuzz).
mkdir -p /lib/firmware/apple/ane
ane-ioctl-tests --write-fw-image /lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho
seed=${FUZZ_SEED:-0x17}
calls=${FUZZ_CALLS:-10000}
for soc in ${FUZZ_SOCS:-0x8103 0x6001 0x6021}; do
	modprobe ane sim_soc="$soc" bo_total_mb=64 bo_client_mb=32 autosuspend_ms=200
	[ -c /dev/accel/accel0 ] || fail "$soc: no accel node"
	start=$(date +%s)
	# A system sleep cycle (pm_test=devices: the devices suspend and
	# resume) while the processes fuzz, on the SoCs whose driver pauses
	# its queue for it (H13).
	sleeper=
	if [ "$soc" != 0x6021 ] && [ -w /sys/power/state ]; then
		(
			sleep 2
			echo devices > /sys/power/pm_test
			rc=0
			echo freeze > /sys/power/state || rc=$?
			echo none > /sys/power/pm_test
			echo "fuzz: system sleep cycle during the run on $soc: rc=$rc"
			exit $rc
		) &
		sleeper=$!
	fi
	ane-ioctl-tests --fuzz "$seed" "$calls" || fail "fuzz on $soc (seed $seed)"
	if [ -n "$sleeper" ]; then
		wait "$sleeper" || fail "the sleep cycle during the fuzz on $soc failed"
	fi
	echo "fuzz: sim_soc=$soc: $calls calls in $(($(date +%s) - start)) s"
	# The deterministic regressions of what the fuzzer found (SKIP where
	# they do not apply). A known open bug would run as
	# `--fuzz-regress --open NAME`, last: it must still fail (XFAIL).
	ane-ioctl-tests --fuzz-regress || fail "regressions on $soc"
	modprobe -r ane
	kmemleak_scan
done

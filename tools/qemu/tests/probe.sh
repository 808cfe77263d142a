# ane-probe end to end on a simulated T8103: info (text and JSON, with the
# GET_PARAM state), the parity cells on the device and on the engine model
# (every cell exact), the two-layer MLP chained through a resident buffer,
# one run of tinygrad's sum with inputs made here, a short bench with a
# receipt, and the usage-error exit code.
modprobe ane sim_soc=0x8103
[ -c /dev/accel/accel0 ] || fail "no accel node"

# info: read-only, with the accel node's driver state.
ane-probe info > /tmp/info.txt
cat /tmp/info.txt
grep -q "bound device:  ane.0" /tmp/info.txt || fail "info: no bound device"
grep -q "fw=none engine=ready completion=polling features=\[\] simulated" /tmp/info.txt ||
	fail "info: no GET_PARAM state line"
# The node's owner and identity: DRM name ane_accel, which eiln/omarchy-ane's
# libane (name "ane") does not take for its own.
grep -q '^  owner:       device=ane.0 module=ane (' /tmp/info.txt || fail "info: no owner line"
grep -q '^  drm version: ane_accel 1.1.0 "Apple Neural Engine": this driver$' /tmp/info.txt ||
	fail "info: no DRM version line naming this driver"
ane-probe --json info > /tmp/info.json
for key in '"kernel"' '"module"' '"bound"' '"power_domains"' '"accel_nodes"' \
	'"genpd"' '"state"' '"fw_state": "none"' '"engine_state": "ready"' \
	'"completion": "polling"' '"simulated": true' '"identity": "this driver"'; do
	grep -q "$key" /tmp/info.json || fail "info --json: no $key"
done
head -c 1 /tmp/info.json | grep -q '{' || fail "info --json is not an object"

# doctor: every rung passes on the simulated T8103 (no device tree; the
# firmware rung does not apply), and the receipt says so. The job rung runs
# the program the record shows running on an M1 first (tinygrad's sum as
# sum.anec, issue 25 point 1), then the project-built stand-in; the
# receipt carries the driver's observation record (point 8), checked
# against what the simulator produced: the first job meets an injected
# foreign-id event.
doctor_args="--timeout-ms $GUEST_JOB_TIMEOUT_MS --receipt /tmp/doctor.json"
if [ -f /fixtures/sum.anec ]; then
	doctor_args="$doctor_args --h13-program /fixtures/sum.anec"
fi
echo 1 > /sys/kernel/debug/ane-sim/stale
ane-probe doctor $doctor_args > /tmp/doctor.txt || { cat /tmp/doctor.txt; fail "doctor failed"; }
cat /tmp/doctor.txt
for rung in soc kernel module device node job parity; do
	grep -q "^ok   $rung " /tmp/doctor.txt || fail "doctor: rung $rung did not pass"
done
grep -q "^skip firmware" /tmp/doctor.txt || fail "doctor: the firmware rung ran on H13"
grep -q '"verdict": "pass"' /tmp/doctor.json || fail "doctor receipt: no pass"
if [ -f /fixtures/sum.anec ]; then
	grep -q "^ok   job .*sum.anec (ran on hardware per the record)" /tmp/doctor.txt ||
		fail "doctor: the recorded program did not run first"
	doctor_observes /tmp/doctor.json T8103 9
	# A second run adds its jobs to the same record: counts, not constants.
	ane-probe doctor $doctor_args > /tmp/doctor.txt || { cat /tmp/doctor.txt; fail "second doctor failed"; }
	expect_eq "T8103 jobs after two doctor runs" "$(obs_value jobs /tmp/doctor.json)" 18
	expect_eq "T8103 foreign events after two runs (no new injection)" "$(obs_value events_foreign /tmp/doctor.json)" 2
	# A file the record does not pin is never run.
	rc=0
	ane-probe doctor --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --receipt /tmp/doctor-x.json \
		--h13-program /fixtures/relu.anec > /tmp/doctor.txt || rc=$?
	expect_eq "doctor with an unpinned H13 program: exit code" "$rc" 1
	grep -q "^FAIL job .*not a program the hardware record shows running on hardware; nothing was run" /tmp/doctor.txt ||
		{ cat /tmp/doctor.txt; fail "doctor: an unpinned H13 program was not refused"; }
	expect_eq "jobs after the refused doctor run" "$(obs_value jobs /tmp/doctor-x.json)" 18
else
	echo "SKIPPED: /fixtures/sum.anec is absent (the recorded program, the observation checks)"
fi

# parity on the device and on the model: every cell exact.
for mode in "" "--model"; do
	rc=0
	ane-probe parity $mode --timeout-ms "$GUEST_JOB_TIMEOUT_MS" > /tmp/parity.txt || rc=$?
	cat /tmp/parity.txt
	expect_eq "parity $mode exit code" "$rc" 0
	expect_eq "parity $mode exact cells" "$(grep -c '| exact$' /tmp/parity.txt)" 7
	if grep -q "FAIL" /tmp/parity.txt; then fail "parity $mode: a cell failed"; fi
done
ane-probe --json parity --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --cells add_mul,select > /tmp/parity.json
grep -q '"verdict": "pass"' /tmp/parity.json || fail "parity --json: no pass"
grep -q '"executor": "device"' /tmp/parity.json || fail "parity --json: not on the device"

# The MLP: two programs, layer 1's output BO bound as layer 2's input.
ane-probe mlp --timeout-ms "$GUEST_JOB_TIMEOUT_MS"
ane-probe --json mlp --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --seed 3 > /tmp/mlp.json
grep -q '"verdict": "pass"' /tmp/mlp.json || fail "mlp --json: no pass"
# The same MLP as one chained EXEC (both layers, one job).
ane-probe --json mlp --chain --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --seed 3 > /tmp/mlp-chain.json
grep -q '"verdict": "pass"' /tmp/mlp-chain.json || fail "mlp --chain: no pass"
# And as two EXECs linked only by a syncobj fence (no WAIT between).
ane-probe --json mlp --fenced --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --seed 3 > /tmp/mlp-fenced.json
grep -q '"verdict": "pass"' /tmp/mlp-fenced.json || fail "mlp --fenced: no pass"

# run: tinygrad's sum of two [1, 64, 1, 1] fp16 tensors (1.0 + 2.0 = 3.0).
if [ -f /fixtures/tinygrad_sum.hwx ]; then
	sum_inputs
	expect_eq "input size" "$(wc -c < /tmp/one.bin | tr -d ' ')" 128
	ane-probe run --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --program /fixtures/tinygrad_sum.hwx \
		--in 5=/tmp/one.bin --in 6=/tmp/two.bin \
		--out 4=/tmp/sum.bin --expect 4=/tmp/three.bin
	cmp /tmp/sum.bin /tmp/three.bin || fail "run: sum differs"

	# bench: a receipt with a pass verdict.
	ane-probe bench --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --program /fixtures/tinygrad_sum.hwx -n 5 --warmup 1 \
		--receipt /tmp/r.json
	grep -q '"verdict": *"pass"' /tmp/r.json || fail "bench receipt: no pass verdict"
	grep -q '"schema": "ane-probe/bench-receipt"' /tmp/r.json || fail "bench receipt: no schema"
else
	echo "SKIPPED: /fixtures/tinygrad_sum.hwx is absent (run, bench)"
fi

# Usage errors exit 2.
rc=0
ane-probe parity --cells no_such_cell 2> /tmp/err.txt || rc=$?
expect_eq "unknown cell exit code" "$rc" 2
grep -q "valid cells" /tmp/err.txt || fail "unknown cell: no list of valid cells"
rc=0
ane-probe frobnicate 2> /dev/null || rc=$?
expect_eq "unknown command exit code" "$rc" 2

modprobe -r ane

# The doctor on a simulated T6001 (issue 25 point 8): the same record,
# observed through the retention task manager's driver path.
if [ -f /fixtures/sum.anec ]; then
	modprobe ane sim_soc=0x6001
	echo 1 > /sys/kernel/debug/ane-sim/stale
	ane-probe doctor --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --receipt /tmp/doctor-6001.json \
		--h13-program /fixtures/sum.anec > /tmp/doctor.txt || { cat /tmp/doctor.txt; fail "doctor on T6001 failed"; }
	cat /tmp/doctor.txt
	grep -q "simulated device T600[01] (M1 Pro/Max)" /tmp/doctor-6001.json || fail "doctor on T6001: the receipt does not name the SoC"
	doctor_observes /tmp/doctor-6001.json T6001 9
	modprobe -r ane
fi
# Without a device: parity on the model still works, on the device it is
# "no device" (exit 4).
ane-probe parity --model > /dev/null
rc=0
ane-probe parity 2> /dev/null || rc=$?
expect_eq "parity without a device exit code" "$rc" 4
kmemleak_scan

# Helpers for the in-guest test scripts. Each test runs in a subshell with
# `set -e`; a failing command or `fail` ends it as FAILED.

fail() {
	echo "ANE-FAIL: $*"
	exit 1
}

# expect_eq WHAT GOT WANT
expect_eq() {
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

# A kmemleak scan. Objects younger than 5 s are never reported, so wait
# first; a leak is printed to the console by kmemleak itself, where the host
# catches it.
kmemleak_scan() {
	[ -e /sys/kernel/debug/kmemleak ] || return 0
	sleep 6
	echo scan > /sys/kernel/debug/kmemleak
	echo scan > /sys/kernel/debug/kmemleak
	if grep -q "unreferenced object" /sys/kernel/debug/kmemleak; then
		cat /sys/kernel/debug/kmemleak
		fail "kmemleak found leaks"
	fi
	echo "kmemleak: scan clean"
}

module_loaded() {
	[ -d /sys/module/ane ]
}

# The number of devices bound to the ane platform driver.
bound_count() {
	n=0
	for d in /sys/bus/platform/drivers/ane/*; do
		[ -L "$d" ] || continue
		case "$(basename "$d")" in module) continue ;; esac
		n=$((n + 1))
	done
	echo $n
}

# Writes the inputs and the expected output of tinygrad's sum fixture:
# /tmp/one.bin and /tmp/two.bin (64 fp16 1.0 and 2.0) and /tmp/three.bin
# (64 fp16 3.0).
sum_inputs() {
	: > /tmp/one.bin
	: > /tmp/two.bin
	: > /tmp/three.bin
	i=0
	while [ $i -lt 64 ]; do
		printf '\000\074' >> /tmp/one.bin   # 0x3C00 = 1.0
		printf '\000\100' >> /tmp/two.bin   # 0x4000 = 2.0
		printf '\000\102' >> /tmp/three.bin # 0x4200 = 3.0
		i=$((i + 1))
	done
}

# How long ane-probe waits for a job that must complete (--timeout-ms).
# The guests run under QEMU's emulation, the simulated engine executing
# programs in the kernel, on shared machines possibly several times slower
# than the one the suites were timed on: the default (5 s for doctor, meant
# for real hardware) is not what a test may hinge on. A hung job still
# fails, and the run's own limit bounds the total (tools/check.sh).
GUEST_JOB_TIMEOUT_MS=120000

# obs_value KEY RECEIPT: the value of field KEY of the doctor receipt's
# observation record (empty when absent).
obs_value() {
	grep -A1 "\"name\": \"$1\"," "$2" | sed -n 's/^ *"value": "\(.*\)",$/\1/p' | head -n 1
}

# doctor_observes RECEIPT SOC_LABEL: the H13 observation record of a doctor
# run whose first pushed job met the simulator's injected stale event
# (`ane-sim/stale`: a foreign-id event 0x05c00000 on both lines during
# the job) carries the values the simulator produced: the foreign word
# on both lines, every job of the run (the recorded sum, the stand-in,
# seven parity cells) done with network id 0x40 and each look timed, and
# the recorded program's row saying it ran on hardware per the record.
doctor_observes() {
	r=$1
	grep -q '"read": true' "$r" || { cat "$r"; fail "$2 doctor: observation record not read"; }
	expect_eq "$2 generation" "$(obs_value generation "$r")" h13
	expect_eq "$2 foreign events (the simulator's injected word, both lines)" "$(obs_value events_foreign "$r")" 2
	expect_eq "$2 jobs" "$(obs_value jobs "$r")" "$3"
	expect_eq "$2 jobs done" "$(obs_value jobs_done "$r")" "$3"
	expect_eq "$2 last job's network id" "$(obs_value last.nid "$r")" 0x40
	expect_eq "$2 last job's outcome" "$(obs_value last.outcome "$r")" done
	expect_eq "$2 last job's STATUS" "$(obs_value last.status_last "$r")" 0x1
	obs_value last.event.0 "$r" | grep -q '^line=0 kind=finish info=0x540' ||
		fail "$2: the last job's first event is not its finish word on line 0"
	obs_value last.event.1 "$r" | grep -q '^line=1 kind=finish info=0x540' ||
		fail "$2: the last job's second event is not its finish word on line 1"
	[ "$(obs_value job_ns_max "$r")" -gt 0 ] || fail "$2: no job time"
	[ "$(obs_value looks_max "$r")" -ge 1 ] || fail "$2: no looks"
	grep -A3 '"name": "events_foreign",' "$r" | grep -q '"1",' || fail "$2: events_foreign not tagged with open item 1"
	grep -B2 -A3 '"sha256": "012e092cf4701754364e6ad7e5853841107d05bf8db2702db8365e14c4c5af8f"' "$r" |
		grep -q '"ran_on_hardware": true' || fail "$2: the recorded sum's row does not say it ran on hardware"
	grep -A4 '"program": "add_1x64"' "$r" | grep -q '"ran_on_hardware": false' ||
		fail "$2: the stand-in's row does not say it never ran"
}

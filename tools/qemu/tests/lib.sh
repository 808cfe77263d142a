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

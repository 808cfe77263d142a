#!/bin/bash
# Judge one QEMU run from its serial log.
#
#   judge.sh LOG TESTS QEMU_STATUS SECONDS ARCH [LIMIT]
#
# Prints one line per test (with the seconds the guest measured) and a
# verdict, and the run's time against its limit. Exit status: 0 for a
# clean pass; 124 when the run hit its time limit (a timeout, named with
# the test that was running, is not a test failure: the machine was too
# slow for the limit or something hung, and the log says which test);
# 1 for anything else.
set -uo pipefail
log=$1 tests=$2 qrc=$3 secs=$4 arch=$5 limit=${6:-}

# What a kernel problem looks like on the console. Each pattern is anchored
# on the kernel's own wording so test output cannot trigger it by accident.
problems='WARNING:|BUG:|Oops|Kernel panic|kernel BUG|general protection fault|Unable to handle kernel'
problems+='|possible circular locking|possible recursive locking|inconsistent lock state|lock held when returning'
problems+='|suspected memory leak|unreferenced object|UBSAN:|KASAN:|KFENCE:'
problems+='|detected stall|blocked for more than|scheduling while atomic'
# The simulator's record of what would hang or corrupt real hardware
# (drivers/accel/ane/sim.rs): an engine read after a DART fault, memory
# unmapped under a running engine, the engine's event interrupt on a DART
# line the driver unmasked.
problems+='|ane-sim: LOCKUP|ane-sim: UNMAPPED-BUSY|ane-sim: FREED-ATTACHED|ane-sim: DART-STORM'

ok=1 timedout=0
found=$(grep -E "$problems" "$log" || true)
if [ -n "$found" ]; then
	echo "qemu[$arch]: kernel problems in the log:"
	printf '%s\n' "$found" | head -n 20 | sed 's/^/    /'
	ok=0
fi
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	# The test that was running: the last one started without a result.
	running=$(awk '/^ANE-START / { t = $2 } /^ANE-TEST / { if ($2 == t) t = "" } END { print t }' "$log")
	echo "qemu[$arch]: TIMEOUT: the run hit its ${limit:-?} s limit after $secs s," \
		"${running:+while test $running was running}${running:-before or after the tests}"
	ok=0 timedout=1
fi
if ! grep -q '^ANE-BOOTED ' "$log"; then
	echo "qemu[$arch]: the guest never reached /init"
	ok=0
fi
for t in $(echo "$tests" | tr ',' ' '); do
	line=$(grep -E "^ANE-TEST $t (PASS|FAIL)" "$log" | tail -n 1)
	if [ -z "$line" ]; then
		echo "qemu[$arch]: test $t: no result"
		ok=0
	else
		echo "qemu[$arch]: ${line#ANE-TEST }"
		case "$line" in *PASS*) ;; *) ok=0 ;; esac
	fi
done
grep '^ANE-FAIL' "$log" | sed "s/^/qemu[$arch]:     /"
if ! grep -q '^ANE-DONE ' "$log"; then
	echo "qemu[$arch]: the guest did not finish its test list"
	ok=0
fi
share=
[ -z "$limit" ] || share=" of its $limit s limit ($((secs * 100 / limit))%)"
if [ "$ok" = 1 ]; then
	echo "qemu[$arch]: clean run in $secs s$share ($log)"
	exit 0
fi
if [ "$timedout" = 1 ]; then
	echo "qemu[$arch]: TIMEOUT after $secs s$share; log: $log"
	exit 124
fi
echo "qemu[$arch]: FAILED run in $secs s$share; log: $log"
exit 1

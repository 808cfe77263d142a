#!/bin/busybox sh
# PID 1 of the test initramfs. Mounts the pseudo file systems, runs the test
# scripts named on the kernel command line (anetest=a,b,c) and prints one
# result line per test and a final summary the host parses:
#
#   ANE-START <name>
#   ANE-TEST <name> PASS|FAIL (<seconds> s)
#   ANE-DONE <passed> passed, <failed> failed (<seconds> s)
#
# The seconds are the guest's uptime differences, so the host can report
# what each test cost and, when a run hits its time limit, which test was
# running (tools/qemu/judge.sh).
#
# It then reboots, which with QEMU's -no-reboot ends the run.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /tmp
export PATH=/bin:/sbin:/usr/bin
echo "ANE-BOOTED $(uname -r) $(uname -m)"

. /tests/lib.sh

# uptime_s: seconds since boot, with one decimal.
uptime_s() { cut -d' ' -f1 /proc/uptime; }
# since T0: seconds from T0 to now, one decimal.
since() { awk -v a="$1" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }'; }

passed=0 failed=0
t_all=$(uptime_s)
for t in $(echo "${anetest:-}" | tr ',' ' '); do
	if [ ! -f "/tests/$t.sh" ]; then
		echo "ANE-TEST $t FAIL (no such test)"
		failed=$((failed + 1))
		continue
	fi
	echo "ANE-START $t"
	t0=$(uptime_s)
	# Not inside `if`: there the shell would ignore set -e.
	(set -e; . "/tests/$t.sh")
	rc=$?
	if [ "$rc" = 0 ]; then
		echo "ANE-TEST $t PASS ($(since "$t0") s)"
		passed=$((passed + 1))
	else
		echo "ANE-TEST $t FAIL ($(since "$t0") s)"
		failed=$((failed + 1))
	fi
done
echo "ANE-DONE $passed passed, $failed failed ($(since "$t_all") s)"
sync
reboot -f

#!/bin/busybox sh
# PID 1 of the test initramfs. Mounts the pseudo file systems, runs the test
# scripts named on the kernel command line (anetest=a,b,c) and prints one
# result line per test and a final summary the host parses:
#
#   ANE-TEST <name> PASS|FAIL
#   ANE-DONE <passed> passed, <failed> failed
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

passed=0 failed=0
for t in $(echo "${anetest:-}" | tr ',' ' '); do
	if [ ! -f "/tests/$t.sh" ]; then
		echo "ANE-TEST $t FAIL (no such test)"
		failed=$((failed + 1))
		continue
	fi
	echo "ANE-START $t"
	# Not inside `if`: there the shell would ignore set -e.
	(set -e; . "/tests/$t.sh")
	rc=$?
	if [ "$rc" = 0 ]; then
		echo "ANE-TEST $t PASS"
		passed=$((passed + 1))
	else
		echo "ANE-TEST $t FAIL"
		failed=$((failed + 1))
	fi
done
echo "ANE-DONE $passed passed, $failed failed"
sync
reboot -f

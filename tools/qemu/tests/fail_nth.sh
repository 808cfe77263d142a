# Deterministic fault injection (issue 17, points 3 and 4), for the
# sanitizer kernel: every call of the driver a client makes (open,
# BO_CREATE, mmap, PROGRAM_CREATE, EXEC, WAIT, GEM_CLOSE, PROGRAM_DESTROY)
# is run once for each fault-injection site it reaches, with that site
# made to fail (the per-task /proc/thread-self/fail-nth: site 1, 2, ...
# until the call completes without reaching the N-th), each in a fresh
# load of the module. The call must fail with ENOMEM (or succeed), and
# nothing may be kept: a device the driver failed to release keeps its
# accel minor, so the next load would not get accel0; kmemleak after all.
fs=/sys/kernel/debug/failslab
[ -d "$fs" ] || fail "no $fs: this kernel has no CONFIG_FAILSLAB"
echo N > "$fs/ignore-gfp-wait"
echo 0 > "$fs/verbose"
echo 0 > /sys/kernel/debug/fail_page_alloc/verbose 2>/dev/null || true
total=0
for soc in ${FAILNTH_SOCS:-0x8103 0x6021}; do
	if [ "$soc" = 0x6021 ]; then
		mkdir -p /lib/firmware/apple/ane
		ane-ioctl-tests --write-fw-image /lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho
	fi
	for op in open bo_create mmap program_create exec wait gem_close program_destroy; do
		n=1
		while :; do
			[ $n -le 400 ] || fail "$soc $op: more than 400 injection sites?"
			modprobe ane sim_soc="$soc" bo_total_mb=64
			[ -c /dev/accel/accel0 ] ||
				fail "$soc $op n=$n: no accel0: a device of an earlier load was never released"
			out=$(ane-ioctl-tests --fail-nth "$op" "$n") || { echo "$out"; fail "$soc $op n=$n"; }
			modprobe -r ane
			case "$out" in *" clean") break ;; esac
			n=$((n + 1))
		done
		echo "fail-nth $soc $op: $((n - 1)) injection sites, each failed cleanly"
		total=$((total + n - 1))
	done
done
modprobe ane sim_soc=0x8103
[ -c /dev/accel/accel0 ] || fail "no accel0 after the last run: a device was never released"
modprobe -r ane
echo "fail-nth: $total injected failures in all"
kmemleak_scan

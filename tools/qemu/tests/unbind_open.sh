# sysfs unbind while a process holds the node open with a mapped BO: its
# ioctls then fail with ENODEV, its mapping keeps working, nothing crashes,
# and once it exits everything is released and the module unloads.
modprobe ane sim_soc=0x8103
rm -f /tmp/unbound
ane-ioctl-tests --after-unbind /dev/accel/accel0 /tmp/unbound > /tmp/hold.log 2>&1 &
pid=$!
i=0
until grep -q READY /tmp/hold.log; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "holder never got ready: $(cat /tmp/hold.log)"
	sleep 0.1
done
echo ane.0 > /sys/bus/platform/drivers/ane/unbind
expect_eq "bound after unbind" "$(bound_count)" 0
[ ! -e /dev/accel/accel0 ] || fail "node still present after unbind"
touch /tmp/unbound
wait $pid || fail "holder: $(cat /tmp/hold.log)"
cat /tmp/hold.log
modprobe -r ane
kmemleak_scan

# With ANE nodes in the device tree (the harness adds one per compatible),
# the module is loaded through the modalias of a node, exactly as udev would,
# binds every node with the right SoC data, unbinds through sysfs, and
# unloads cleanly.
# Nodes with a reg get their address in the device name (c000000.ane-t8103).
devname() { basename "$(ls -d /sys/bus/platform/devices/*ane-"$1")"; }
alias=$(cat "/sys/bus/platform/devices/$(devname t8103)/modalias")
echo "modalias: $alias"
modprobe "$alias"
module_loaded || fail "modalias did not load ane"
expect_eq "bound devices" "$(bound_count)" 4
for soc in t8103:T8103 t6000:T6000 t6020:T6020 t6021:T6021; do
	node=${soc%%:*} id=${soc##*:}
	[ -L "/sys/bus/platform/drivers/ane/$(devname "$node")" ] || fail "ane-$node not bound"
	dmesg | grep -q "ane-$node: Apple Neural Engine: $id " || fail "no probe message for $id"
done
dmesg | grep -q "ane-t8103: Apple Neural Engine: T8103 (M1), H13, HostDriven backend" ||
	fail "T8103 SoC data wrong"
dmesg | grep -q "ane-t6021: Apple Neural Engine: T6021 (M2 Max), H14, Firmware backend" ||
	fail "T6021 SoC data wrong"
ane-probe info
# Unbind and rebind one device through sysfs.
t6000=$(devname t6000)
echo "$t6000" > /sys/bus/platform/drivers/ane/unbind
expect_eq "bound after unbind" "$(bound_count)" 3
echo "$t6000" > /sys/bus/platform/drivers/ane/bind
expect_eq "bound after rebind" "$(bound_count)" 4
modprobe -r ane
! module_loaded || fail "module still loaded"
kmemleak_scan

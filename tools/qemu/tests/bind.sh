# With ANE nodes in the device tree (the harness adds one per compatible,
# each on test power domains shaped like its SoC's PMGR chain), the module is
# loaded through the modalias of a node, exactly as udev would, binds every
# node with the right SoC data and all of its power domains, refuses a node
# with the wrong number of domains, lets the domains go down when the device
# autosuspends and brings them up again in order on open, unbinds through
# sysfs, and unloads cleanly.
# Nodes with a reg get their address in the device name (c000000.ane-t8103).
devname() { basename "$(ls -d /sys/bus/platform/devices/*ane-"$1")"; }
# The transitions of one test domain, in order ("on"/"off" per line).
pd_log() { dmesg | sed -n "s/.*ane_test_pd: $1 \(on\|off\)$/\1/p"; }
pd_last() { pd_log "$1" | tail -n 1; }
# The order in which the named domains first came up.
pd_first_on() { dmesg | sed -n 's/.*ane_test_pd: \([a-z0-9-]*\) on$/\1/p' | grep "^$1" | awk '!seen[$0]++' | tr '\n' ' '; }

modprobe ane_test_pd
alias=$(cat "/sys/bus/platform/devices/$(devname t8103)/modalias")
echo "modalias: $alias"
modprobe "$alias" autosuspend_ms=300
module_loaded || fail "modalias did not load ane"
# The H14 nodes are refused: their firmware needs an address space from the
# ANE DARTs, and QEMU gives these nodes no IOMMU (the simulated T6021 covers
# the firmware path on x86_64).
expect_eq "bound devices" "$(bound_count)" 3
[ ! -L "/sys/bus/platform/drivers/ane/$(devname bad)" ] || fail "the node with two of five domains was bound"
# Nodes without reg-names: the T8103 one whose first reg is the record's
# engine window binds; one elsewhere and PR #584's T602x node are refused
# with what to do.
[ -L "/sys/bus/platform/drivers/ane/$(devname u8103)" ] || fail "the T8103 node without reg-names was not bound"
[ ! -L "/sys/bus/platform/drivers/ane/$(devname uwrong)" ] || fail "an unnamed window off the engine was bound"
dmesg | grep -q "ane-uwrong: refusing this T8103 node before touching it: EngineAt { found: 26a000000 }" ||
	fail "no refusal message for the unnamed window off the engine"
dmesg | grep -q "ane-pr584: refusing this T6020 node before touching it: Domains { found: 1 }" ||
	fail "no refusal message for PR #584's T602x node"
dmesg | grep -q "ane-pr584: .*install this driver's overlay" || fail "the refusal does not say what to install"
for node in t6020 t6021; do
	dmesg | grep -q "ane-$node: no IOMMU: the firmware's address space needs the ANE DARTs" ||
		fail "no IOMMU message for ane-$node"
done
dmesg | grep -q "ane-bad: refusing this T8103 node before touching it: Domains { found: 2 }" ||
	fail "no refusal message for the node with the wrong domains"
# Probe brought every domain up, parents first, the SET leaves in list order.
expect_eq "T8103 power-up order" "$(pd_first_on t8103-)" \
	"t8103-ane-sys t8103-ane-sys-cpu t8103-ane-base t8103-ane-set1 t8103-ane-set2 t8103-ane-set3 t8103-ane-set4 t8103-ane-set5 "
expect_eq "T6021 power-up order" "$(pd_first_on t6021-)" \
	"t6021-ane-sys t6021-ane-sys-mpm t6021-ane-td t6021-ane-base t6021-ane-set1 t6021-ane-set2 t6021-ane-set3 t6021-ane-set4 t6021-ane-cpu "
# Idle: the device autosuspends and every domain goes down.
sleep 2
for d in sys sys-cpu base set1 set2 set3 set4 set5; do
	expect_eq "t8103-ane-$d after autosuspend" "$(pd_last "t8103-ane-$d")" off
done
expect_eq "runtime status" "$(cat "/sys/bus/platform/devices/$(devname t8103)/power/runtime_status")" suspended
# Opening the node wakes the device: the domains come up again. (The open
# itself then fails with ENODEV: QEMU gives these nodes no IOMMU, and every
# client needs an address space.)
node=$(ls "/sys/bus/platform/devices/$(devname t8103)/accel")
ons=$(pd_log t8103-ane-set5 | grep -c on)
sys_ons=$(pd_log t8103-ane-sys | grep -c on)
(: <"/dev/accel/$node") 2>/dev/null || true
expect_eq "t8103-ane-set5 on open" "$(pd_log t8103-ane-set5 | grep -c on)" $((ons + 1))
expect_eq "t8103-ane-sys on open" "$(pd_log t8103-ane-sys | grep -c on)" $((sys_ons + 1))
for soc in t8103:T8103 t6000:T6000; do
	node=${soc%%:*} id=${soc##*:}
	[ -L "/sys/bus/platform/drivers/ane/$(devname "$node")" ] || fail "ane-$node not bound"
	dmesg | grep -q "ane-$node: Apple Neural Engine: $id " || fail "no probe message for $id"
done
dmesg | grep -q "ane-t8103: Apple Neural Engine: T8103 (M1), H13, HostDriven backend" ||
	fail "T8103 SoC data wrong"
ane-probe info
# Unbind and rebind one device through sysfs.
t6000=$(devname t6000)
echo "$t6000" > /sys/bus/platform/drivers/ane/unbind
expect_eq "bound after unbind" "$(bound_count)" 2
echo "$t6000" > /sys/bus/platform/drivers/ane/bind
expect_eq "bound after rebind" "$(bound_count)" 3
modprobe -r ane
! module_loaded || fail "module still loaded"
kmemleak_scan

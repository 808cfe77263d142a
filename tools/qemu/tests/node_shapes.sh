# Device-tree node shapes, on the simulated device standing for each SoC
# (sim_node=1): a node without reg-names and with AsahiLinux PR #584's
# power-domain count. H13 binds it (the first reg is the engine window);
# PR #584's T602x node is refused before anything is touched, with what to
# install instead. The DT-bound side of the same rules runs on arm64
# (tools/qemu/tests/bind.sh).
for soc in 0x8103 0x6001; do
	modprobe ane sim_soc=$soc sim_node=1
	[ -c /dev/accel/accel0 ] || fail "sim_soc=$soc: a node without reg-names was not bound"
	ane-probe info | grep -q "engine=ready" || fail "sim_soc=$soc: the device is not ready"
	modprobe -r ane
done
before=$(dmesg | wc -l)
new() { dmesg | tail -n +$((before + 1)); }
modprobe ane sim_soc=0x6021 sim_node=1
[ ! -e /dev/accel/accel0 ] || fail "PR #584's T602x node was bound"
new | grep -q "refusing this T6021 node before touching it: Domains { found: 1 }" ||
	fail "no refusal message for PR #584's T602x node"
new | grep -q "install this driver's overlay" || fail "the refusal does not say what to install"
! new | grep -q "iBoot patches\|ANE firmware" || fail "the refused node got as far as the firmware"
modprobe -r ane
kmemleak_scan

# The udev rule (packaging/common/70-ane.rules) through the real udevadm
# (Debian trixie's udev 257, put into the initramfs by
# tools/udev/guest-udevadm.sh) against the real /sys of the bound simulated
# device: `udevadm verify` accepts the rules file, and `udevadm test` gives
# the accel node of a device bound by `ane` (T8103 table) and of one bound
# by `ane-fw` (T6021 table) group render (gid 989 from the initramfs's
# /etc/group), mode 0660 and the uaccess tag, and leaves a device the rule
# does not name (/dev/null) alone.
rules=/usr/lib/udev/rules.d/70-ane.rules
[ -x /usr/bin/udevadm ] || fail "no udevadm in the initramfs (tools/udev/guest-udevadm.sh)"
udevadm verify "$rules" || fail "udevadm verify refuses $rules"

# after LABEL FILE: the line after the section header LABEL of udevadm
# test's summary, without its indentation.
after() { sed -n "/^$1\$/{n;s/^ *//;p;q}" "$2"; }

# node_test SOC DRIVER: binds the simulated SOC, checks the driver of the
# accel node's device and what udevadm test assigns to the node.
node_test() {
	modprobe ane sim_soc="$1" autosuspend_ms=200
	[ -c /dev/accel/accel0 ] || fail "$1: no accel node"
	drv=$(basename "$(readlink /sys/class/accel/accel0/device/driver)")
	expect_eq "$1: driver of the accel node's device" "$drv" "$2"
	udevadm test /sys/class/accel/accel0 >/tmp/udev.out 2>&1 || {
		cat /tmp/udev.out
		fail "$1: udevadm test failed"
	}
	grep '70-ane.rules:[0-9]' /tmp/udev.out || true
	expect_eq "$1 ($2): node group" "$(after 'Device node group:' /tmp/udev.out)" "render (gid=989)"
	expect_eq "$1 ($2): node mode" "$(after 'Device node permission:' /tmp/udev.out)" 0660
	sed -n '/^Tags:$/,/^[^ ]/p' /tmp/udev.out | grep -qx '  uaccess' || {
		cat /tmp/udev.out
		fail "$1 ($2): no uaccess tag"
	}
	echo "$1 ($2): /dev/accel/accel0 group render (gid=989), mode 0660, tag uaccess"
	modprobe -r ane
}

node_test 0x8103 ane
mkdir -p /lib/firmware/apple/ane
ane-ioctl-tests --write-fw-image /lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho
node_test 0x6021 ane-fw

# A node the rule does not name keeps what the kernel gave it.
udevadm test /sys/class/mem/null >/tmp/udev.out 2>&1 || fail "udevadm test /sys/class/mem/null failed"
grep -q 'Reading rules file: /usr/lib/udev/rules.d/70-ane.rules' /tmp/udev.out || fail "udevadm test did not read 70-ane.rules"
! grep -q '70-ane.rules:[0-9]' /tmp/udev.out || fail "70-ane.rules applied to /dev/null"
[ -z "$(after 'Device node group:' /tmp/udev.out)" ] || fail "/dev/null got a group"
echo "/dev/null: 70-ane.rules left it alone"

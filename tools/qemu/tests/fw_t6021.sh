# The simulated T6021 (M2 Max): the firmware start and its fault matrix,
# then programs and calls through the firmware and faults at run time.
# Each load stages a synthetic Mach-O image (the simulated coprocessor does
# not run it; the test flavour skips the SHA-256 pin), runs the release
# contract against the firmware model and a CONFIG_GET. A fault leaves the
# device bound in the failed state with the failed step and, once the core
# was released, the captured registers; nothing hangs, nothing leaks.
fwdir=/lib/firmware/apple/ane
mkdir -p "$fwdir"

# expect FAULT_BITS STATE STEP CAPTURE
expect() {
	modprobe ane sim_soc=0x6021 sim_fw_faults="$1"
	[ -c /dev/accel/accel0 ] || fail "faults $1: no accel node (the device must stay bound)"
	ane-ioctl-tests --fw-expect "$2" "$3" "$4" || fail "faults $1"
	modprobe -r ane
}

# No firmware file: failed before anything is touched. (An earlier test
# of this boot may have installed one.)
rm -f "$fwdir/t602x_ane0_fw_selene_rc4x.macho"
expect 0 failed 0 no
ane-ioctl-tests --write-fw-image "$fwdir/t602x_ane0_fw_selene_rc4x.macho"
expect 0 running 0 no
dmesg | grep -q "ANE firmware running" || fail "no running message"
# T602x devices have no sysfs bind/unbind: a released coprocessor cannot
# be restarted without a reboot.
modprobe ane sim_soc=0x6021
[ -L /sys/bus/platform/drivers/ane-fw/ane-fw.0 ] || fail "the simulated T6021 is not bound to ane-fw"
[ ! -e /sys/bus/platform/drivers/ane-fw/unbind ] || fail "ane-fw offers sysfs unbind"
[ -e /sys/bus/platform/drivers/ane/unbind ] || fail "ane (H13) lost its sysfs unbind"
modprobe -r ane
# The optional RTKit session: this node has no mailbox, so the driver says
# so and keeps the channel transport.
modprobe ane sim_soc=0x6021 rtkit=1
ane-ioctl-tests --fw-expect running 0 no || fail "rtkit=1"
dmesg | grep -q "RTKit: the node has no mailbox; channel transport only" || fail "no RTKit message"
modprobe -r ane
expect 64 failed 1 no    # ISLAND_OFF: preflight refuses, no register read
expect 1 failed 5 yes    # NO_READY
expect 2 failed 8 yes    # BAD_DONE
expect 32 failed 9 yes   # BAD_CHANNEL_TABLE
expect 4 failed 0 no     # STALLED_RING: CONFIG_GET times out
expect 8 failed 0 no     # ERROR_STATUS: CONFIG_GET answered with an error
expect 16 running 0 no   # MISSING_FINISH only affects calls
# The firmware path: compiled fixtures loaded as sections run through
# PROGRAM_LOAD, PROC_CREATE and CALL (the simulated coprocessor executes
# them on the H13 engine model) and match the CPU reference.
modprobe ane sim_soc=0x6021
ane-ioctl-tests --h14 || fail "h14 suite"
modprobe -r ane
# Faults in a running firmware: an error status, a missing finish event,
# a stalled ring. Each fails the call and quarantines the firmware.
for f in 8 16 4; do
	modprobe ane sim_soc=0x6021
	ane-ioctl-tests --h14-fault "$f" || fail "h14 fault $f"
	modprobe -r ane
done
kmemleak_scan

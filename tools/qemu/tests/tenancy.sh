# kernel-2 1.12: every T6021 client shares one device address space with
# the firmware, and the kernel cannot look inside their programs, so files
# of one user at a time may be open unless the administrator allows
# several (multi_user=1). Another user's open is EBUSY while this user's
# file is open, succeeds once it is closed, and then holds off this user;
# with multi_user=1 both are open at once. Node mode 0666 so that only the
# driver's rule can refuse uid 1000.
! module_loaded || modprobe -r ane
mkdir -p /lib/firmware/apple/ane
ane-ioctl-tests --write-fw-image /lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho
modprobe ane sim_soc=0x6021
[ -c /dev/accel/accel0 ] || fail "no accel node"
chmod 0666 /dev/accel/accel0
ane-ioctl-tests --tenancy single /dev/accel/accel0 || fail "one user at a time"
modprobe -r ane
modprobe ane sim_soc=0x6021 multi_user=1
chmod 0666 /dev/accel/accel0
ane-ioctl-tests --tenancy multi /dev/accel/accel0 || fail "multi_user=1"
modprobe -r ane
# H13 spaces are per file: several users are always fine there.
modprobe ane sim_soc=0x8103
chmod 0666 /dev/accel/accel0
ane-ioctl-tests --tenancy multi /dev/accel/accel0 || fail "T8103, two users"
modprobe -r ane
kmemleak_scan

# The ioctl suite against the simulated T6021 (M2 Max) table: the firmware
# backend behind the same UAPI. Tests of the H13 task manager (its fault
# injection, autosuspend, interrupt) and the H13 program rules are skipped
# with a reason; fw_t6021 covers the firmware's own paths and faults.
mkdir -p /lib/firmware/apple/ane
ane-ioctl-tests --write-fw-image /lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho
SIM_SOC=0x6021
. /tests/ioctl.sh

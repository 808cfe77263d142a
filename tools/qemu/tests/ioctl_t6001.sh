# The ioctl suite against the simulated T6001 (M1 Max) table, completion
# polled. T600x keeps the task manager in retention, so a hang or an engine
# error wedges it until the device is bound again (the record's drain does
# not revive it): the --wedge runs check EIO while wedged and recovery by
# sysfs unbind/bind; hang-awake unbinds before any runtime power cycle
# (kernel-2 N7: the driver forces one rather than leak and pin).
SIM_SOC=0x6001 WEDGE_TESTS="hang error hang-awake"
. /tests/ioctl.sh

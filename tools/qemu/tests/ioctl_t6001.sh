# The ioctl suite against the simulated T6001 (M1 Max) table.
SIM_SOC=0x6001
. /tests/ioctl.sh

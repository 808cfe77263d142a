# kernel-2 N10, checked by whoever reads the log: run it last, so the
# simulated T8103 is still bound when init reboots; the reboot calls the
# driver's .shutdown, which logs "T8103: shutdown: engine stopped" after
# the ANE-DONE line (no job may go on DMAing into the next kernel).
modprobe ane sim_soc=0x8103
[ -c /dev/accel/accel0 ] || fail "no accel node"

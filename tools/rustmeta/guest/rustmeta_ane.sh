# In-guest test of tools/rustmeta/e2e.sh (run by tools/qemu/init.sh, which
# sources tools/qemu/tests/lib.sh first). The test-flavour ane.ko, built
# against a headers tree whose rust/ ane-rust-meta regenerated, loads into
# the original kernel; a simulated T8103 binds and its accel node appears;
# everything unloads.
modprobe ane sim_soc=0x8103
module_loaded || fail "module not loaded"
expect_eq "bound devices" "$(bound_count)" 1
[ -c /dev/accel/accel0 ] || fail "no /dev/accel/accel0"
dmesg | grep -q "ane ane.0: Apple Neural Engine: T8103" || fail "no probe message"
modprobe -r ane
! module_loaded || fail "module still loaded"
[ ! -e /dev/accel/accel0 ] || fail "accel node still there"

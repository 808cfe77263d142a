# modprobe ane / modprobe -r ane on a machine with no ANE: the module loads,
# registers its driver, binds nothing, and unloads cleanly.
modprobe ane
module_loaded || fail "module not loaded"
[ -d /sys/bus/platform/drivers/ane ] || fail "platform driver 'ane' not registered"
[ -d /sys/bus/platform/drivers/ane-fw ] || fail "platform driver 'ane-fw' not registered"
expect_eq "bound devices" "$(bound_count)" 0
ane-probe info
ane-probe info --json > /tmp/info.json
grep -q '"loaded": true' /tmp/info.json || fail "ane-probe does not see the module"
modprobe -r ane
! module_loaded || fail "module still loaded"
[ ! -d /sys/bus/platform/drivers/ane ] || fail "driver still registered"
kmemleak_scan

# The ane_rs Python package (userspace/ane-py) on the simulated T8103
# through the real driver: its pytest suite with every test that takes a
# device run twice, on the host engine model and on /dev/accel/accel0
# (ANE_RS_REQUIRE_DEVICE=1: the device half fails rather than skips, and
# every device test collected must pass); tinygrad's sum through
# ane_rs.model(...).predict on the device, checked against numpy; the
# fallback to the host engine model once the module is gone; kmemleak after
# the unload. Without ../shared's fixtures the tests on compiled programs
# skip, as in the other suites. Only the x86_64 initramfs carries Python
# (tools/qemu/guest-python.sh); the arm64 boots do not list this test.
[ -x /usr/bin/python3 ] || fail "no Python in this initramfs (x86_64 only, tools/qemu/guest-python.sh)"
export HOME=/tmp ANE_SHARED=/
cd /tmp
pytest() { python3 -m pytest -p no:cacheprovider --color=no "$@"; }

modprobe ane sim_soc=0x8103
[ -c /dev/accel/accel0 ] || fail "no accel node"

# The device tests the suite has: its test ids carry the "device" parameter.
pytest --collect-only -q /ane-py/tests > /tmp/collect.txt || { cat /tmp/collect.txt; fail "pytest collection"; }
want=$(grep -cE '\[(.*-)?device(-.*)?\]$' /tmp/collect.txt || true)
[ "$want" -gt 0 ] || fail "the suite has no device tests"

rc=0
ANE_RS_REQUIRE_DEVICE=1 pytest -v -rs /ane-py/tests > /tmp/pytest.txt 2>&1 || rc=$?
cat /tmp/pytest.txt
expect_eq "pytest exit code" "$rc" 0
got=$(grep -cE '\[(.*-)?device(-.*)?\] PASSED' /tmp/pytest.txt || true)
if [ -d /fixtures ]; then
	expect_eq "device tests passed (of $want collected)" "$got" "$want"
else
	# A clone without ../shared: the tests on compiled programs skip.
	echo "SKIPPED: /fixtures is absent (the device tests on compiled programs)"
	[ "$got" -gt 0 ] || fail "no device test passed"
fi
echo "ane_rs pytest: $got of $want device tests passed on /dev/accel/accel0"

# A compiled program as a user runs it: no device= (the accel node is the
# default), the fallback warning made an error so the model cannot stand in.
if [ -f /fixtures/tinygrad_sum.hwx ]; then
	python3 -W error::RuntimeWarning - <<'PY' || fail "ane_rs: tinygrad_sum.hwx on the device"
import numpy as np
import ane_rs

m = ane_rs.model("/fixtures/tinygrad_sum.hwx")
assert m.device.kind == "device" and str(m.device.path) == "/dev/accel/accel0", m.device
a = np.full((1, 64, 1, 1), 1.0, np.float16)
b = np.full((1, 64, 1, 1), 2.0, np.float16)
(out,) = m.predict([a, b])
assert out.dtype == np.float16 and out.shape == (1, 64, 1, 1), (out.dtype, out.shape)
assert np.array_equal(out, np.full((1, 64, 1, 1), 3.0, np.float16)), out
print(f"ane_rs: {m.format} on {m.device.path}: 1.0 + 2.0 = {out.flat[0]} (64 elements, exact)")
PY
else
	echo "SKIPPED: /fixtures/tinygrad_sum.hwx is absent (predict on the device)"
fi

modprobe -r ane
# Without the module: Device(), model() and Model() raise NoDeviceError,
# never falling back on their own; device="model" is the host engine model
# (skipped above, a device existed).
rc=0
pytest -q -rs -k no_device_fails_loudly /ane-py/tests > /tmp/pytest-nodev.txt 2>&1 || rc=$?
cat /tmp/pytest-nodev.txt
expect_eq "pytest without a device exit code" "$rc" 0
if [ -d /fixtures ]; then
	grep -q "^1 passed" /tmp/pytest-nodev.txt || fail "the no-device test did not run"
fi
kmemleak_scan

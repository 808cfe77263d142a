# `make demo`: the real job, as a user on an M1 would run it, on the
# simulated T8103 through the real driver: what the machine looks like,
# the first-contact ladder, the parity cells, the two-layer MLP, one
# compiled program (tinygrad's sum) with its output checked, and the same
# program from Python (ane_rs, x86_64 guest only) against numpy; then four
# ONNX models of the compiler's zoo (an MLP, a small CNN, a MobileNet
# block, a transformer MLP block) compiled (`ane-probe compile` and
# `ane_rs.compile`) and run through the driver against onnxruntime's
# output for the same input (x86_64 guest only: the zoo comes with the
# pytest suite; the guest has no onnxruntime, so the host's pytest step
# holds the stored NAME.ort.npy to a live onnxruntime run).
modprobe ane sim_soc=0x8103
[ -c /dev/accel/accel0 ] || fail "no accel node"
echo "### ane-probe info"
ane-probe info
echo "### ane-probe doctor"
ane-probe doctor --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --receipt /tmp/doctor.json || fail "doctor"
echo "### ane-probe parity"
ane-probe parity --timeout-ms "$GUEST_JOB_TIMEOUT_MS" 2>/dev/null || fail "parity"
echo "### ane-probe mlp"
ane-probe mlp --timeout-ms "$GUEST_JOB_TIMEOUT_MS" 2>/dev/null || fail "mlp"
if [ -f /fixtures/tinygrad_sum.hwx ]; then
	echo "### ane-probe run --program tinygrad_sum.hwx (1.0 + 2.0, 64 elements)"
	sum_inputs
	ane-probe run --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --program /fixtures/tinygrad_sum.hwx \
		--in 5=/tmp/one.bin --in 6=/tmp/two.bin \
		--out 4=/tmp/sum.bin --expect 4=/tmp/three.bin || fail "run"
	cmp /tmp/sum.bin /tmp/three.bin || fail "run: sum differs"
else
	echo "SKIPPED: /fixtures/tinygrad_sum.hwx is absent (run)"
fi
if [ -x /usr/bin/python3 ] && [ -f /fixtures/tinygrad_sum.hwx ]; then
	echo "### Python: ane_rs.model(\"tinygrad_sum.hwx\").predict([a, b])"
	python3 -W error::RuntimeWarning - <<'PY' || fail "python"
import os

import numpy as np
import ane_rs

print("accel nodes:", [(n["path"], n["driver"]) for n in ane_rs.accel_nodes()])
m = ane_rs.model("/fixtures/tinygrad_sum.hwx")
print(f"loaded {os.path.basename(m.path)} ({m.format}, sha256 {m.sha256[:12]}...) on {m.device.path}")
for t in m.inputs + m.outputs:
    print(f"  {t.direction:6} {t.name}: fp16 {t.shape}")
a = np.full((1, 64, 1, 1), 1.0, np.float16)
b = np.arange(64, dtype=np.float16).reshape(1, 64, 1, 1)
(out,) = m.predict([a, b])
print("a + b =", out.reshape(-1)[:8], "...", out.dtype, out.shape)
assert np.array_equal(out, a + b)
print("matches numpy: yes")
PY
else
	echo "SKIPPED: no Python in this initramfs or /fixtures/tinygrad_sum.hwx absent (python)"
fi
zoo=/ane-py/tests/data
if [ -x /usr/bin/python3 ] && [ -f $zoo/small_cnn.onnx ]; then
	echo "### ane-probe compile small_cnn.onnx, then four ONNX models compiled and run through the driver, against onnxruntime"
	ane-probe compile $zoo/small_cnn.onnx -o /tmp/small_cnn.anec || fail "compile"
	python3 -W error::RuntimeWarning - <<'PY' || fail "onnx models"
import json

import numpy as np
import ane_rs

zoo = "/ane-py/tests/data"
for name in ["mlp3_b4", "small_cnn", "mobilenet_block", "transformer_mlp"]:
    meta = json.load(open(f"{zoo}/{name}.json"))
    path = "/tmp/small_cnn.anec" if name == "small_cnn" else f"/tmp/{name}.anec"
    if name != "small_cnn":
        ane_rs.compile(f"{zoo}/{name}.onnx", path)
    m = ane_rs.model(path)
    x = np.load(f"{zoo}/{name}.in.npy").astype(np.float16)
    (y,) = m.predict({meta["input"]: x})
    ort = np.load(f"{zoo}/{name}.ort.npy").astype(np.float64)
    # In the model's own shape, as onnxruntime gives it.
    assert y.shape == ort.shape, (name, y.shape, ort.shape)
    err = float(np.max(np.abs(y.astype(np.float64) - ort)))
    print(f"{name}: {meta['tds']} TDs on {m.device.path}, max abs error {err:.2e} "
          f"against onnxruntime (bound {meta['bound']:.2e})")
    assert err <= meta["bound"], name
print("ONNX -> compile -> simulated ANE through the driver: matches onnxruntime")
PY
else
	echo "SKIPPED: no Python or no compiler zoo in this initramfs (onnx models)"
fi
modprobe -r ane

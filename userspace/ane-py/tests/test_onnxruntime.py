# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""onnxruntime is the numerical reference of the compiler's zoo.

Each model of data/ (see test_compile.py) has `NAME.ort.npy`: onnxruntime's
CPU output (float32) for the fixed input `NAME.in.npy`. On the host, where
tools/py/requirements.txt installs onnxruntime (tools/py/check.sh sets
ANE_RS_REQUIRE_ORT=1, so a missing onnxruntime fails instead of skipping),
`test_references_are_onnxruntime` runs every model on onnxruntime and
holds the stored files to its output; `ANE_RS_WRITE_ORT_REFS=1` rewrites
them (after `cargo run -p ane --example onnx_zoo` changed the zoo).

`test_matches_onnxruntime` compiles each model with `ane_rs.compile`, runs
it on each device (the host engine model; in the QEMU guest, which has no
onnxruntime, also the simulated ANE through the driver) and holds the
output to the stored onnxruntime output within the model's documented
fp16 bound (`NAME.json`, `ane::compiler::zoo`); the max error of each is
printed in the summary at the end of the run.
On the host it also compares with a live onnxruntime run."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import ane_rs

DATA = Path(__file__).resolve().parent / "data"
MODELS = sorted(p.stem for p in DATA.glob("*.json"))
# The four models of the acceptance; the zoo has more.
REQUIRED = ["mlp3_b4", "small_cnn", "mobilenet_block", "transformer_mlp"]


def onnxruntime():
    try:
        import onnxruntime as ort
    except ImportError as e:
        if os.environ.get("ANE_RS_REQUIRE_ORT") == "1":
            pytest.fail(f"ANE_RS_REQUIRE_ORT=1, but onnxruntime does not import: {e}")
        return None
    return ort


def run_ort(ort, name, meta, x):
    sess = ort.InferenceSession(str(DATA / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    (y,) = sess.run([meta["output"]], {meta["input"]: x.astype(np.float32)})
    return y


def test_every_model_has_a_reference():
    for name in REQUIRED:
        assert name in MODELS, name
    for name in MODELS:
        assert (DATA / f"{name}.ort.npy").is_file(), name


@pytest.mark.parametrize("name", MODELS)
def test_references_are_onnxruntime(name):
    ort = onnxruntime()
    if ort is None:
        pytest.skip("onnxruntime is not installed (the QEMU guest); the stored references were not re-derived")
    meta = json.loads((DATA / f"{name}.json").read_text())
    x = np.load(DATA / f"{name}.in.npy")
    y = run_ort(ort, name, meta, x)
    path = DATA / f"{name}.ort.npy"
    if os.environ.get("ANE_RS_WRITE_ORT_REFS") == "1":
        np.save(path, y.astype(np.float32))
    stored = np.load(path)
    assert stored.shape == y.shape, (name, stored.shape, y.shape)
    # onnxruntime's float32 kernels may round differently on another CPU;
    # far below every bound (> 3e-3).
    np.testing.assert_allclose(stored, y, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime(dev, tmp_path, name, record_property):
    meta = json.loads((DATA / f"{name}.json").read_text())
    path = tmp_path / f"{name}.anec"
    ane_rs.compile(str(DATA / f"{name}.onnx"), str(path))
    m = ane_rs.model(path, device=dev)
    x = np.load(DATA / f"{name}.in.npy").astype(np.float16)
    (y,) = m.predict({meta["input"]: x})
    ref = np.load(DATA / f"{name}.ort.npy").astype(np.float64)
    # The output comes back in the model's own shape (`compile --help`).
    assert y.shape == ref.shape, (name, y.shape, ref.shape)
    got = y.astype(np.float64)
    err = float(np.max(np.abs(got - ref)))
    line = f"{name} on {dev.kind}: max abs error vs onnxruntime {err:.2e} (bound {meta['bound']:.2e})"
    ort = onnxruntime()
    if ort is not None:
        live = run_ort(ort, name, meta, x).astype(np.float64)
        lerr = float(np.max(np.abs(got - live)))
        line += f", vs onnxruntime {ort.__version__} run now {lerr:.2e}"
        assert lerr <= meta["bound"], (name, "live onnxruntime", lerr, meta["bound"])
    # Printed after the run (conftest.py): not between a test's id and its
    # verdict, which tools/qemu/tests/python.sh counts per line.
    record_property("max error", line)
    assert err <= meta["bound"], (name, err, meta["bound"])

# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""ane_rs.compile: the ONNX models of data/ (written, with their inputs,
the f64 CPU evaluation of each model and its fp16 tolerance, by
`cargo run -p ane --example onnx_zoo -- userspace/ane-py/tests/data`, seed
29) compiled, loaded and run with inputs in the model's own shape and held
to that reference; test_onnxruntime.py holds them to onnxruntime."""

import json
from pathlib import Path

import numpy as np
import pytest

import ane_rs

DATA = Path(__file__).resolve().parent / "data"
MODELS = sorted(p.stem for p in DATA.glob("*.json"))


def test_the_zoo_is_there():
    assert len(MODELS) >= 6, MODELS


@pytest.mark.parametrize("name", MODELS)
def test_compile_and_run(dev, tmp_path, name):
    meta = json.loads((DATA / f"{name}.json").read_text())
    out = tmp_path / f"{name}.anec"
    blob = ane_rs.compile(str(DATA / f"{name}.onnx"), str(out))
    assert out.read_bytes() == blob
    m = ane_rs.model(out, device=dev)
    x = np.load(DATA / f"{name}.in.npy").astype(np.float16)
    (y,) = m.predict({meta["input"]: x})
    ref = np.load(DATA / f"{name}.ref.npy").astype(np.float64)
    # In the model's own shape, as the model declares its output.
    assert y.shape == ref.shape, (name, y.shape, ref.shape)
    got = y.astype(np.float64)
    err = float(np.max(np.abs(got - ref)))
    assert err <= meta["bound"], (name, err, meta["bound"])


def test_compile_refuses(tmp_path):
    # Not ONNX.
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\xff\xff\xff")
    with pytest.raises(ane_rs.AneError, match="not an ONNX model"):
        ane_rs.compile(str(junk))
    # An unsupported op: the node, its op and the reason.
    with pytest.raises(ane_rs.AneError, match="node 'act' \\(Softmax\\): .*supported subset"):
        ane_rs.compile(str(DATA / "refused.onnx"))
    # H14 is out of scope.
    with pytest.raises(ane_rs.InputError, match="out of scope"):
        ane_rs.compile(str(DATA / "mlp_fused.onnx"), target="t6021")
    with pytest.raises(ane_rs.InputError):
        ane_rs.compile(str(tmp_path / "missing.onnx"))

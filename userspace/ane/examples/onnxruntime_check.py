#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Cross-checks the compiler against onnxruntime.

For every NAME.onnx written by `cargo run -p ane --example onnx_zoo -- DIR`,
runs onnxruntime (CPU, float32) on NAME.in.npy and compares its output with
NAME.engine.npy, the host engine model's output of the compiled program,
within the bound in NAME.json (the zoo's documented fp16 tolerance).

Exit 0 when every model is within its bound, 1 otherwise; prints SKIPPED
and exits 0 when onnxruntime or numpy is not installed (nothing checked).
"""

import json
import pathlib
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        print(f"SKIPPED: onnxruntime cross-check: {e}; nothing was checked")
        return 0
    d = pathlib.Path(sys.argv[1])
    models = sorted(m.with_suffix(".onnx") for m in d.glob("*.json"))
    if not models:
        print(f"no .onnx in {d}")
        return 1
    failed = 0
    for m in models:
        name = m.stem
        meta = json.loads((d / f"{name}.json").read_text())
        x = np.load(d / f"{name}.in.npy")
        engine = np.load(d / f"{name}.engine.npy").astype(np.float64)
        sess = ort.InferenceSession(str(m), providers=["CPUExecutionProvider"])
        (ref,) = sess.run([meta["output"]], {meta["input"]: x})
        ref = ref.astype(np.float64).reshape(engine.shape)
        err = float(np.max(np.abs(engine - ref)))
        ok = err <= meta["bound"]
        failed += not ok
        print(f"{name}: {meta['tds']} TD(s), engine vs onnxruntime {ort.__version__} "
              f"max abs error {err:.3e} (bound {meta['bound']:.3e}) {'ok' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

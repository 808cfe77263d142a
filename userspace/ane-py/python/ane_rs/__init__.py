# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Apple Neural Engine on Linux, from Python.

    import numpy as np, ane_rs
    m = ane_rs.model("prog.anec")
    outs = m.predict([np.zeros((1, 64, 1, 1), np.float16)])

``model(path)`` loads a compiled program (HWX or ``.anec``) on the first
accel node of the ``ane`` driver, or on the host engine model when there is
none (with a warning); pass ``device=`` to choose. ``Device``, ``Buffer`` and
``Model.bind``/``run`` give resident buffers and chained programs;
``compile(onnx_path, output)`` compiles an ONNX model (the subset of
``ane-probe compile --help``) to an ``.anec`` whose tensors keep the model's
names; ``parity()`` runs the parity cells; ``accel_nodes()`` and ``system_info()``
describe the machine. Errors are ``AneError`` (``InputError`` for a bad
argument, ``NoDeviceError`` when no ``ane`` node exists).
"""

import warnings

from ._native import (  # noqa: F401
    AneError,
    Buffer,
    Device,
    InputError,
    Model,
    NoDeviceError,
    TensorInfo,
    __version__,
    accel_nodes,
    compile,
    system_info,
)

__all__ = [
    "AneError",
    "Buffer",
    "Device",
    "InputError",
    "Model",
    "NoDeviceError",
    "TensorInfo",
    "accel_nodes",
    "compile",
    "default_device",
    "host_model",
    "model",
    "parity",
    "system_info",
]


def host_model():
    """The host engine model as a device (no ANE needed)."""
    return Device.model()


def default_device():
    """The first accel node of the ``ane`` driver; the host engine model,
    with a ``RuntimeWarning``, when there is none."""
    try:
        return Device()
    except NoDeviceError as e:
        warnings.warn(f"{e}; using the host engine model", RuntimeWarning, stacklevel=3)
        return Device.model()


def model(path, device=None):
    """Loads the compiled program at ``path`` (HWX or ``.anec``) on
    ``device`` (default: ``default_device()``)."""
    if device is None:
        device = default_device()
    return device.load(str(path))


def parity(device=None):
    """Runs the parity cells on ``device`` (default: ``default_device()``);
    one dict per cell, ``verdict`` "exact", "within_bound" or "fail"."""
    if device is None:
        device = default_device()
    return device.parity()

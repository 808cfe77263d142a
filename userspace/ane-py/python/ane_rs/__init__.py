# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Apple Neural Engine on Linux, from Python.

    import numpy as np, ane_rs
    m = ane_rs.Model("prog.anec")                  # the ANE, or NoDeviceError
    m = ane_rs.Model("prog.anec", device="model")  # the host engine model (CPU)
    outs = m.predict([np.zeros((1, 64, 1, 1), np.float16)])

``Model(path, device=None)`` (also spelled ``model(path, device=None)``)
loads a compiled program (HWX or ``.anec``) on the first accel node of the
``ane`` driver. When there is none it raises ``NoDeviceError`` saying why;
it never falls back to the CPU on its own. ``device="model"`` runs on the
host engine model, ``device="/dev/accel/accelN"`` on that node, and a
``Device`` on that device. ``Device``, ``Buffer`` and ``Model.bind``/``run``
give resident buffers and chained programs, and ``run_chain(models)`` runs
several models back to back as one job (one chained EXEC on a device);
``compile(onnx_path, output)``
compiles an ONNX model (the subset of ``ane-probe compile --help``) to an
``.anec`` whose tensors keep the model's names; ``parity()`` runs the parity
cells; ``accel_nodes()`` and ``system_info()`` describe the machine.
Every object may be used from several threads.

Errors are ``AneError``; its subclasses are ``InputError`` (a bad argument,
naming it), ``NoDeviceError`` (no ``ane`` node) and ``NotSupportedError``
(a program the host engine model does not execute). What the loader
corrects in a program file (an ``.anec`` header whose input/output roles
contradict its descriptors) is issued as a ``UserWarning`` and kept in
``Model.notes``.
"""

import os

from ._native import (  # noqa: F401
    AneError,
    Buffer,
    Device,
    InputError,
    Model,
    NoDeviceError,
    NotSupportedError,
    TensorInfo,
    __version__,
    accel_nodes,
    compile,
    run_chain,
    system_info,
)

__all__ = [
    "AneError",
    "Buffer",
    "Device",
    "InputError",
    "Model",
    "NoDeviceError",
    "NotSupportedError",
    "TensorInfo",
    "accel_nodes",
    "compile",
    "default_device",
    "host_model",
    "model",
    "parity",
    "run_chain",
    "system_info",
]


def host_model():
    """The host engine model as a device (no ANE needed)."""
    return Device.model()


def default_device():
    """The first accel node of the ``ane`` driver; ``NoDeviceError`` when
    there is none (``host_model()`` is the CPU engine model, on request)."""
    return Device()


def model(path, device=None):
    """``Model(path, device)``: loads the compiled program at ``path`` (HWX
    or ``.anec``) on ``device``: None or ``"ane"`` for the first accel node
    of the ``ane`` driver, ``"model"`` for the host engine model, an accel
    node path, or a ``Device``."""
    return Model(path, device)


def _device(device):
    """What ``device=`` names, as ``Model`` reads it."""
    if isinstance(device, Device):
        return device
    if device is None or device == "ane":
        return Device()
    if device == "model":
        return Device.model()
    if isinstance(device, (str, os.PathLike)) and os.fspath(device).startswith("/"):
        return Device(os.fspath(device))
    raise InputError(
        f"device: {device!r}, expected None or \"ane\" (the first accel node of the ane "
        "driver), \"model\" (the host engine model), an accel node path or a Device"
    )


def parity(device=None):
    """Runs the parity cells on ``device`` (as for ``model``); one dict per
    cell, ``verdict`` "exact", "within_bound" or "fail"."""
    return _device(device).parity()

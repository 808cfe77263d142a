# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Fixtures: the devices a test runs on, and the public compiled programs of
../shared/fixtures (or $ANE_SHARED/fixtures), as the Rust tests find them. A
user's clone has no ../shared: those tests skip, saying so.

Every test taking `dev` runs twice: on the host engine model, always, and on
the first accel node of the ane driver when one exists (skipped otherwise,
so the suite passes on a machine without an ANE). ANE_RS_REQUIRE_DEVICE=1
turns that skip into a failure: the QEMU guest's run
(tools/qemu/tests/python.sh) sets it, so the device half cannot silently
vanish."""

import os
from pathlib import Path

import pytest

import ane_rs


def fixtures_dir():
    shared = os.environ.get("ANE_SHARED")
    if shared:
        return Path(shared) / "fixtures"
    # userspace/ane-py/tests -> the checkout's parent, like the Rust tests'
    # CARGO_MANIFEST_DIR/../../../shared.
    return Path(__file__).resolve().parents[4] / "shared" / "fixtures"


@pytest.fixture
def fixture():
    d = fixtures_dir()

    def get(name):
        if not d.is_dir():
            pytest.skip(f"{d} is absent (set ANE_SHARED); nothing was checked")
        p = d / name
        if not p.is_file():
            pytest.skip(f"{p} is absent; nothing was checked")
        return p

    return get


def has_ane_node():
    return any(n.get("driver") == "ane" for n in ane_rs.accel_nodes())


@pytest.fixture(params=["model", "device"])
def dev(request):
    if request.param == "model":
        return ane_rs.host_model()
    if not has_ane_node():
        if os.environ.get("ANE_RS_REQUIRE_DEVICE") == "1":
            pytest.fail("ANE_RS_REQUIRE_DEVICE=1, but no accel node of the ane driver exists")
        pytest.skip("no accel node of the ane driver; the host engine model ran this test")
    d = ane_rs.Device()
    assert d.kind == "device"
    return d


def pytest_terminal_summary(terminalreporter):
    """The figures tests recorded with `record_property("max error", ...)`
    (test_onnxruntime.py), one line each, passed or failed."""
    lines = [
        v
        for key in ("passed", "failed")
        for r in terminalreporter.stats.get(key, [])
        for k, v in getattr(r, "user_properties", [])
        if k == "max error"
    ]
    if lines:
        terminalreporter.section("max error against onnxruntime")
        for line in lines:
            terminalreporter.write_line(line)

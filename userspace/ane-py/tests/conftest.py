# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Fixtures: the host engine model as the device, and the public compiled
programs of ../shared/fixtures (or $ANE_SHARED/fixtures), as the Rust tests
find them. A user's clone has no ../shared: those tests skip, saying so."""

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


@pytest.fixture
def dev():
    return ane_rs.host_model()

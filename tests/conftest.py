"""Shared fixtures.

``lazy_policy``: run a test under ``lazynp.set_policy("lazy")`` (every operation recorded),
for the tests of lazynp's graph machinery (fusion, tree kernels, flush planning, errors
raised when a pending value is read).  Under the default policy small work on computed
arrays runs at once and never reaches that machinery.
"""
from __future__ import annotations

import pytest

import lazynp


@pytest.fixture
def lazy_policy():
    with lazynp.policy("lazy"):
        yield

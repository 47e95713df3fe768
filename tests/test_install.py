"""Installing lazynp on a machine without a working C compiler falls back to the pure Python
recorder: the C extension is declared optional (README: the set-up commands work with or
without a C compiler)."""
from __future__ import annotations

import os
import runpy

import pytest
import setuptools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_c_extension_is_optional(monkeypatch):
    pytest.importorskip("Cython")
    got = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: got.update(kwargs))
    monkeypatch.chdir(ROOT)
    runpy.run_path(os.path.join(ROOT, "setup.py"))
    extensions = got["ext_modules"]
    assert [e.name for e in extensions] == ["lazynp._base._speedups"]
    assert all(e.optional for e in extensions)

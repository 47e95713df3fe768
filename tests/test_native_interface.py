"""The interface between the C extension and the Python modules (``lazynp._base.native``).

The extension reads nothing of Python's by name at run time: what it needs is handed to it
through the calls of ``native.INTERFACE``.  These tests fail when the two sides drift: a
call that takes other names than listed, a ``configure...`` call that would run without a
name it reads, a new input not listed, or the extension reading a module's globals again.
"""
import importlib
import inspect
import pathlib
import re

import pytest

import lazynp  # noqa: F401  (configures the extension)
from lazynp._base import native

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYX = ROOT / "lazynp" / "_base" / "_speedups.pyx"
C_ONLY = pytest.mark.skipif(native.ext is None, reason="the C extension is not in use")


@C_ONLY
@pytest.mark.parametrize("name", sorted(native.INTERFACE))
def test_each_call_takes_exactly_the_listed_names(name):
    params = tuple(inspect.signature(getattr(native.ext, name)).parameters)
    assert params == native.INTERFACE[name][0]


@C_ONLY
def test_every_input_of_the_extension_is_listed():
    inputs = {n for n in dir(native.ext)
              if n.startswith(("configure", "set_")) or n == "install_member"}
    assert inputs == set(native.INTERFACE)


@C_ONLY
@pytest.mark.parametrize("name", sorted(n for n in native.INTERFACE if n.startswith("configure")))
def test_a_configure_call_without_one_of_its_keywords_is_refused(name):
    fn = getattr(native.ext, name)
    params = inspect.signature(fn).parameters
    keywords = [p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY]
    positional = [None] * (len(params) - len(keywords))
    for missing in keywords:
        with pytest.raises(TypeError, match=missing):
            fn(*positional, **{k: None for k in keywords if k != missing})


@pytest.mark.parametrize("name", sorted(native.INTERFACE))
def test_the_listed_module_makes_each_call(name):
    module = importlib.import_module(native.INTERFACE[name][1])
    assert re.search(rf"\b{name}\b", inspect.getsource(module)), (name, module.__name__)


def test_the_extension_reads_no_module_globals():
    source = PYX.read_text()
    assert "globals()" not in source and "vars(" not in source
    assert not re.search(r"^\s*(from lazynp\S* c?import|import lazynp)", source, re.M)
    assert not re.findall(r"\w+_dict\[[^\]]*\]", source)

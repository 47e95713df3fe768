"""``lazynp.testing``: NumPy's testing API, accepting lazynp arrays.

Every name of :mod:`numpy.testing` is here.  The assertions that compare values convert
their array arguments (lazynp arrays, also inside lists, tuples and dicts) to NumPy's
values first and then call :mod:`numpy.testing`'s own function, so the checks, tolerances
and messages are NumPy's.  Everything else (``assert_raises``, ``assert_warns``,
``suppress_warnings``, ...) is :mod:`numpy.testing`'s object itself: those call the code
under test with the caller's arguments, which must stay lazynp arrays.

Plain ``numpy.testing.assert_equal`` cannot take lazynp arrays: it sends arrays to
``assert_array_equal`` only when ``isinstance(x, numpy.ndarray)``, which only a subclass of
``numpy.ndarray`` passes, and otherwise compares with ``bool(desired == actual)``.
"""
from __future__ import annotations

import functools
import inspect

import numpy.testing as _np_testing

from .array.ndarray import ndarray

__all__ = list(_np_testing.__all__)


def _numpy_value(x):
    """``x`` with each lazynp array replaced by its NumPy value, recursing into lists, tuples
    (named tuples keep their class) and dicts; a 0-d result NumPy gives as a scalar becomes
    NumPy's scalar."""
    if isinstance(x, ndarray):
        v = x._value()
        return v[()] if x._scalar and v.ndim == 0 else v
    t = type(x)
    if t is list:
        return [_numpy_value(v) for v in x]
    if isinstance(x, tuple):
        vals = [_numpy_value(v) for v in x]
        return t(*vals) if hasattr(x, "_fields") else t(vals)
    if t is dict:
        return {k: _numpy_value(v) for k, v in x.items()}
    return x


def _converting(fn, n_values: int, first: int = 0):
    """``fn`` with positional arguments ``first .. first + n_values - 1`` (and the keywords of
    the same names) converted by :func:`_numpy_value`."""
    names = list(inspect.signature(fn).parameters)[first:first + n_values]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (pytest: show the caller's line)
        args = tuple(_numpy_value(a) if first <= i < first + n_values else a
                     for i, a in enumerate(args))
        for k in names:
            if k in kwargs:
                kwargs[k] = _numpy_value(kwargs[k])
        return fn(*args, **kwargs)
    return wrapper


# (name, how many value arguments, index of the first): the functions that compare values
_VALUE_ARGUMENTS = {
    "assert_equal": (2, 0),
    "assert_almost_equal": (2, 0),
    "assert_approx_equal": (2, 0),
    "assert_array_equal": (2, 0),
    "assert_array_almost_equal": (2, 0),
    "assert_array_less": (2, 0),
    "assert_allclose": (2, 0),
    "assert_array_almost_equal_nulp": (2, 0),
    "assert_array_max_ulp": (2, 0),
    "assert_string_equal": (2, 0),
    "assert_": (1, 0),
    "assert_array_compare": (2, 1),
    "print_assert_equal": (2, 1),
    "build_err_msg": (1, 0),
}

for _name in __all__:
    _obj = getattr(_np_testing, _name)
    if _name in _VALUE_ARGUMENTS:
        _obj = _converting(_obj, *_VALUE_ARGUMENTS[_name])
    globals()[_name] = _obj
del _name, _obj


def __getattr__(name: str):
    """The private names NumPy's own tests import from :mod:`numpy.testing`."""
    try:
        return getattr(_np_testing, name)
    except AttributeError:
        raise AttributeError(f"module 'lazynp.testing' has no attribute {name!r}") from None


def __dir__():
    return sorted(set(dir(_np_testing)) | set(globals()))


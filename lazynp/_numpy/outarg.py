"""``out=`` the NumPy way, for functions whose lazy version records the result without it.

* A NumPy array as ``out``: the user holds that buffer, so NumPy's function runs now with
  it (NumPy's checks, casting and values; the result is ``out`` itself).
* A lazynp array as ``out``: NumPy's function runs once on stand-ins of the arguments
  (zero-stride dummies of the real shapes) with a buffer of ``out``'s shape and dtype, so
  NumPy's exceptions for this ``out`` come at the call; then the call into such a buffer is
  recorded and written into ``out``, which is returned itself.
* Anything else: NumPy's own exception for it.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np

from ..array.calls import _fill_deep, dummy, lazy_call, make_template
from ..array.ndarray import ndarray
from ..array.operands import to_numpy


_PARAMETERS: dict = {}


def _parameters(np_fn) -> tuple:
    """``np_fn``'s parameters (cached: ``inspect.signature`` takes tens of microseconds)."""
    try:
        return _PARAMETERS[np_fn]
    except KeyError:
        pass
    except TypeError:               # (an unhashable callable)
        return _signature_parameters(np_fn)
    params = _PARAMETERS[np_fn] = _signature_parameters(np_fn)
    return params


def _signature_parameters(np_fn) -> tuple:
    try:
        return tuple(inspect.signature(np_fn).parameters.values())
    except (TypeError, ValueError):
        return ()


def takes_out(np_fn) -> bool:
    """Whether NumPy's ``np_fn`` has an ``out`` parameter."""
    return any(p.name == "out" for p in _parameters(np_fn))


_OUT_INDEX: dict = {}


def _out_index(np_fn) -> int | None:
    """The position of ``out`` among ``np_fn``'s positional parameters (None: keyword-only
    or none), cached."""
    try:
        return _OUT_INDEX[np_fn]
    except (KeyError, TypeError):
        pass
    found = None
    for i, p in enumerate(_parameters(np_fn)):
        if p.name == "out" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            found = i
    try:
        _OUT_INDEX[np_fn] = found
    except TypeError:
        pass
    return found


def split_out(np_fn, args: tuple, kwargs: dict):
    """``(args, kwargs, out)``: the call without ``out`` (given by keyword or at its
    position in ``np_fn``'s signature; the positional arguments after it become keywords)."""
    if "out" in kwargs:
        kwargs = dict(kwargs)
        return args, kwargs, kwargs.pop("out")
    if len(args) < 2:
        return args, kwargs, None
    i = _out_index(np_fn)
    if i is None or len(args) <= i:
        return args, kwargs, None
    params = _parameters(np_fn)
    kwargs = dict(kwargs)
    kwargs.update((q.name, v) for q, v in zip(params[i + 1:], args[i + 1:]))
    return args[:i], kwargs, args[i]


def _stand_ins(args: tuple, kwargs: dict):
    """The call's arguments with each pending lazynp array as a zero-stride dummy of its
    shape and dtype (computed ones as their values): NumPy checks them without the work."""
    nodes: list = []
    tpl = make_template((tuple(args), dict(kwargs)), nodes)
    return _fill_deep(tpl, [n.value if n.value is not None and n.op.kind != "view"
                            else dummy(n) for n in nodes])


def _into_buffer(out_value, *vals, np_fn, **kwargs):
    """``np_fn(*vals, out=<a copy of out's value>, **kwargs)``: that copy (what NumPy leaves
    in ``out``, also where it writes only part of it)."""
    buf = np.array(out_value, copy=True)
    with np.errstate(all="ignore"):
        np_fn(*vals, out=buf, **kwargs)
    return buf


def call_with_out(name: str, np_fn, args: tuple, kwargs: dict, out, *, kind: str = "opaque",
                  probe_args: tuple | None = None):
    """NumPy's ``np_fn(*args, out=out, **kwargs)`` (``out`` not None), recorded when
    ``out`` is a lazynp array.  Returns ``out`` (or, where NumPy's function returns another
    array than ``out``, that array).

    ``probe_args``: NumPy stand-ins for ``args`` that give the same result shape and dtype
    with less work (a contraction over an axis of length one), for NumPy's checks of
    ``out``; default: zero-stride dummies of the real shapes."""
    if type(out) is tuple and len(out) == 1:
        out = out[0]
    if isinstance(out, np.ndarray) or not isinstance(out, ndarray):
        # the user's NumPy buffer, or something NumPy rejects with its own message
        return np_fn(*to_numpy(args), out=out, **to_numpy(kwargs))
    a, k = _stand_ins(args, kwargs)
    if probe_args is not None:
        a = probe_args
    buf = np.empty(out.shape, out.dtype)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        returned = np_fn(*a, out=buf, **k)          # NumPy's errors for this out
    res = lazy_call(name + ":out", _into_buffer, (out,) + tuple(args), dict(kwargs, np_fn=np_fn),
                    kind=kind, meta=lambda nodes, tpl: (out.shape, out.dtype))
    out[...] = res
    if returned is not buf:         # (NumPy's function returns a new array: fft.hfft, ifft2)
        return lazy_call(name, np_fn, tuple(args), kwargs, kind=kind)
    return out

"""``lazynp.random``: NumPy's exact random streams, returned as lazynp arrays.

The legacy global-state API (``seed``, ``rand``, ``randn``, ``randint``...) draws from
NumPy's own global ``RandomState`` and ``default_rng`` wraps a real NumPy ``Generator``,
so a program gets the same numbers under ``import lazynp as np`` as under NumPy.
Array arguments are materialized; in-place methods (``shuffle``) write back lazily.
"""
from __future__ import annotations

import numpy.random as _npr

from . import devices as _devices
from ._numpy.fallback import wrap_result
from .array.operands import to_numpy
from .array.ndarray import ndarray

_INPLACE = {"shuffle"}


def _plain(x) -> bool:
    """No lazy array in ``x`` (numbers, strings, None, tuples of them: a size)."""
    t = type(x)
    if t is int or t is float or x is None or t is str or t is bool:
        return True
    return t is tuple and all(type(v) is int for v in x)


def _call(fn, args, kwargs):
    if _devices.DEFAULTS_OPEN:                                   # (device hook)
        res = _devices.random_call(fn, args, kwargs)
        if res is not None:
            return res
    if all(_plain(a) for a in args) and all(_plain(v) for v in kwargs.values()):
        return wrap_result(fn(*args, **kwargs))        # (the common call: sizes, scalars)
    if fn.__name__ in _INPLACE and args and isinstance(args[0], ndarray):
        target = args[0]
        v = target._value().copy()
        fn(v, *to_numpy(args[1:]), **to_numpy(kwargs))
        target[...] = v
        return None
    out = kwargs.get("out")
    if isinstance(out, ndarray):
        kw = dict(to_numpy(kwargs))
        kw["out"] = out._value().copy()
        fn(*to_numpy(args), **kw)
        out[...] = kw["out"]
        return out
    return wrap_result(fn(*to_numpy(args), **to_numpy(kwargs)))


def _wrap(fn):
    def f(*args, **kwargs):
        return _call(fn, args, kwargs)
    f.__name__ = getattr(fn, "__name__", "random")
    f.__doc__ = getattr(fn, "__doc__", None)
    return f


class _StreamProxy:
    """A NumPy ``Generator``/``RandomState`` whose methods return lazynp arrays."""

    def __init__(self, inner):
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if callable(attr) and not name.startswith("_"):
            wrapped = _wrap(attr)
            object.__setattr__(self, name, wrapped)    # (found directly from now on)
            return wrapped
        return attr

    def __setattr__(self, name, value):
        setattr(self._inner, name, value)

    def __repr__(self):
        return repr(self._inner)


class Generator(_StreamProxy):
    """Wraps :class:`numpy.random.Generator` (same streams)."""

    def __init__(self, bit_generator):
        super().__init__(bit_generator if isinstance(bit_generator, _npr.Generator)
                         else _npr.Generator(bit_generator))


class RandomState(_StreamProxy):
    """Wraps :class:`numpy.random.RandomState` (same streams)."""

    def __init__(self, seed=None):
        super().__init__(seed if isinstance(seed, _npr.RandomState) else _npr.RandomState(seed))


def default_rng(seed=None) -> Generator:
    """Like :func:`numpy.random.default_rng`, returning lazynp arrays."""
    if isinstance(seed, _StreamProxy):
        return seed
    return Generator(_npr.default_rng(seed))


def seed(seed=None) -> None:
    _npr.seed(to_numpy(seed))


def get_state(legacy=True):
    return _npr.get_state(legacy)


def set_state(state) -> None:
    _npr.set_state(state)


# re-exported NumPy objects (bit generators, seed sequences) are NumPy's own
SeedSequence = _npr.SeedSequence
BitGenerator = _npr.BitGenerator
PCG64 = _npr.PCG64
PCG64DXSM = _npr.PCG64DXSM
MT19937 = _npr.MT19937
Philox = _npr.Philox
SFC64 = _npr.SFC64

_LEGACY = [n for n in dir(_npr) if not n.startswith("_") and callable(getattr(_npr, n))
           and n not in globals()]
for _n in _LEGACY:
    globals()[_n] = _wrap(getattr(_npr, _n))
del _n

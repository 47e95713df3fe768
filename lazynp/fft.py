"""``lazynp.fft``: NumPy's FFTs recorded lazily (NumPy's pocketfft runs them), with gradient
rules (:mod:`lazynp.autograd.rules`); ``hfft``/``ihfft`` and the shifts are built from them.
``fftfreq``/``rfftfreq`` and the rest are NumPy's (counted fallbacks)."""
from __future__ import annotations

import operator
import sys

import numpy as _np

from ._numpy.conversion import asarray as _asarray
from ._numpy.eager import eager_first
from ._numpy.fallback import FallbackModule
from ._numpy.namespace import conjugate, roll
from ._numpy.outarg import call_with_out
from .array.calls import lazy_call


def _dtypes(a, real_out=False, real_in=False):
    """NumPy's output dtype for ``a``'s dtype (a one-element probe)."""
    probe = _np.zeros(2, a.dtype)
    if real_out:
        return _np.fft.irfft(probe).dtype
    if real_in:
        return _np.fft.rfft(probe).dtype
    return _np.fft.fft(probe).dtype


def _one(name, np_fn, kind):
    """A 1-D transform along ``axis``; ``kind``: 'c' (complex to complex), 'r' (real to
    half spectrum), 'ir' (half spectrum to real)."""
    def f(a, n=None, axis=-1, norm=None, out=None):
        if out is not None:
            return call_with_out("fft." + name, np_fn, (a,),
                                 {"n": n, "axis": axis, "norm": norm}, out)
        a = _asarray(a)
        if a.ndim == 0:
            np_fn(_np.zeros(a.shape, a.dtype))               # NumPy's error
        ax = operator.index(axis)
        if not -a.ndim <= ax < a.ndim:
            np_fn(_np.zeros((1,) * a.ndim, a.dtype), n, axis)  # NumPy's AxisError
        ax %= a.ndim
        m = a.shape[ax]
        if kind == "ir":
            length = 2 * (m - 1) if n is None else operator.index(n)
        else:
            length = m if n is None else operator.index(n)
        if length < 1:
            np_fn(_np.zeros(a.shape, a.dtype), n, axis)       # NumPy's error
        shape = list(a.shape)
        shape[ax] = length // 2 + 1 if kind == "r" else length
        dt = _dtypes(a, real_out=kind == "ir", real_in=kind == "r")
        return _record(name, np_fn, a, {"n": n, "axis": axis, "norm": norm}, shape, dt, out)
    return _named(f, name, np_fn)


def _record(name, np_fn, a, kw, shape, dt, out):
    """Record ``np_fn(a, **kw)`` (result ``shape`` and ``dt``), into ``out`` if given."""
    if out is not None:
        return call_with_out("fft." + name, np_fn, (a,), kw, out)
    return lazy_call("fft." + name, np_fn, (a,), kw, meta=lambda nodes, tpl: (tuple(shape), dt))


def _named(f, name, np_fn):
    f.__name__ = name
    f.__doc__ = np_fn.__doc__
    return f


def cook_nd(shape, s, axes, invreal):
    """``(s, axes)`` as NumPy's n-D transforms read them."""
    if s is None:
        axes = list(range(len(shape))) if axes is None else list(axes)
        s = [shape[a] for a in axes]
        if invreal and s:
            s[-1] = 2 * (shape[axes[-1]] - 1)
    else:
        s = [operator.index(x) for x in s]
        axes = list(range(-len(s), 0)) if axes is None else list(axes)
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    return s, axes


def _nd(name, np_fn, kind, default_axes=None):
    def f(a, s=None, axes=default_axes, norm=None, out=None):
        if out is not None:
            return call_with_out("fft." + name, np_fn, (a,),
                                 {"s": s, "axes": axes, "norm": norm}, out)
        a = _asarray(a)
        ss, ax = cook_nd(a.shape, s, axes, kind == "ir")
        ax = [operator.index(x) % a.ndim if a.ndim else x for x in ax]
        shape = list(a.shape)
        for x, n in zip(ax, ss):
            shape[x] = n
        if kind == "r" and ax:
            shape[ax[-1]] = ss[-1] // 2 + 1
        dt = _dtypes(a, real_out=kind == "ir", real_in=kind == "r")
        return _record(name, np_fn, a, {"s": s, "axes": axes, "norm": norm}, shape, dt, out)
    return _named(f, name, np_fn)


fft = _one("fft", _np.fft.fft, "c")
ifft = _one("ifft", _np.fft.ifft, "c")
rfft = _one("rfft", _np.fft.rfft, "r")
irfft = _one("irfft", _np.fft.irfft, "ir")
fftn = _nd("fftn", _np.fft.fftn, "c")
ifftn = _nd("ifftn", _np.fft.ifftn, "c")
rfftn = _nd("rfftn", _np.fft.rfftn, "r")
irfftn = _nd("irfftn", _np.fft.irfftn, "ir")
fft2 = _nd("fft2", _np.fft.fft2, "c", (-2, -1))
ifft2 = _nd("ifft2", _np.fft.ifft2, "c", (-2, -1))
rfft2 = _nd("rfft2", _np.fft.rfft2, "r", (-2, -1))
irfft2 = _nd("irfft2", _np.fft.irfft2, "ir", (-2, -1))

_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's ``hfft``: ``irfft(conj(a))`` with the swapped normalization."""
    if out is not None:
        return call_with_out("fft.hfft", _np.fft.hfft, (a,), {"n": n, "axis": axis, "norm": norm},
                             out)
    if norm not in _SWAP:
        _np.fft.hfft(_np.zeros(2), norm=norm)             # NumPy's error
    a = _asarray(a)
    if n is None:
        n = (a.shape[axis] - 1) * 2
    return irfft(conjugate(a), n, axis, _SWAP[norm], out)


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's ``ihfft``: ``conj(rfft(a))`` with the swapped normalization."""
    if out is not None:
        return call_with_out("fft.ihfft", _np.fft.ihfft, (a,),
                             {"n": n, "axis": axis, "norm": norm}, out)
    if norm not in _SWAP:
        _np.fft.ihfft(_np.zeros(2), norm=norm)
    return conjugate(rfft(a, n, axis, _SWAP[norm]))


def _shift(x, axes, sign):
    x = _asarray(x)
    if axes is None:
        axes = tuple(range(x.ndim))
        shift = [sign * (d // 2) for d in x.shape]
    elif isinstance(axes, (int, _np.integer)):
        shift = sign * (x.shape[axes] // 2)
    else:
        shift = [sign * (x.shape[ax] // 2) for ax in axes]
    return roll(x, shift, axes)


def fftshift(x, axes=None):
    return _shift(x, axes, 1)


def ifftshift(x, axes=None):
    return _shift(x, axes, -1)


for _f in (hfft, ihfft, fftshift, ifftshift):
    _f.__doc__ = getattr(_np.fft, _f.__name__).__doc__


def _with_eager(name, fn):
    return eager_first(getattr(_np.fft, name), fn, "opaque")


_NAMES = ("fft", "ifft", "rfft", "irfft", "fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2",
          "rfft2", "irfft2", "hfft", "ihfft", "fftshift", "ifftshift")
_LAZY = {name: _with_eager(name, globals()[name]) for name in _NAMES}
_LAZY["_cook_nd"] = cook_nd        # (read by the gradient rules)
sys.modules[__name__] = FallbackModule(__name__, _np.fft, _LAZY)

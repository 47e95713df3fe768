"""The set functions (``unique*``, ``intersect1d``, ``union1d``) and ``histogram``/
``histogram_bin_edges`` built from recorded lazynp ops when their inputs are lazy and
everything is recorded (inside ``grad``/``jit``/``record()``), so that a gradient flows
through them; the namespace's (NumPy's on the forced inputs) otherwise.

Which elements are equal, which bin a value falls in: decided on the values now (NumPy
runs on them), as a shape would be.  The results that are values of the input are then
taken from it lazily, so their gradient is exact where the function is differentiable:

* a unique value is the input's element at its first occurrence (ties: the first one gets
  the gradient, the others 0; JAX's ``unique`` does the same); ``intersect1d``'s values
  come from ``ar1``, ``union1d``'s from the first occurrence in ``concatenate(ar1, ar2)``;
* ``histogram``'s counts are piecewise constant in ``a`` (gradient 0); weighted counts are
  ``sum`` of the weights in each bin (gradient 1 to each weight in its bin); the edges of
  ``bins=int`` are ``linspace(min(a), max(a))`` (or of ``range``): their gradient goes to
  the extreme elements; ``density=True`` divides by ``sum`` and the bin widths, recorded.
  A string ``bins`` (an estimator of the bin width from the data) stays NumPy's (it raises
  when its edges are differentiated).

Indices, inverses and counts are integers, as NumPy gives them.
"""
from __future__ import annotations

import numpy as np

from . import namespace as ns
from .conversion import recording
from ..array.operands import to_numpy

__all__ = ["unique", "unique_values", "unique_counts", "unique_inverse", "unique_all",
           "intersect1d", "union1d", "histogram", "histogram_bin_edges"]


def _numpy(name, args, kwargs=None):
    """The namespace's own version: NumPy's function on the forced values."""
    return getattr(ns, name)(*args, **(kwargs or {}))


def _first_positions(flat_values, wanted):
    """The position in ``flat_values`` of the first element equal to each of ``wanted``
    (NaN matches the first NaN)."""
    u, first = np.unique(flat_values, return_index=True, equal_nan=True)
    pos = np.searchsorted(u, wanted)
    return first[np.minimum(pos, max(len(u) - 1, 0))] if len(u) else pos


def _taken(x, flat_positions, shape):
    """``ravel(x)[flat_positions]`` reshaped (recorded)."""
    return ns.reshape(ns.take(ns.ravel(x), np.asarray(flat_positions, dtype=np.intp)), shape)


def _int_array(v):
    return ns.asarray(np.asarray(v))


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, **kwargs):
    """NumPy's ``unique`` (values recorded from ``ar``'s first occurrences)."""
    opts = dict(return_index=return_index, return_inverse=return_inverse,
                return_counts=return_counts, axis=axis, equal_nan=equal_nan, **kwargs)
    if not recording([ar]):
        return _numpy("unique", (ar,), opts)
    ar = ns.asarray(ar)
    res = np.unique(to_numpy(ar), **dict(opts, return_index=True))
    vals, index = res[0], res[1]
    if axis is None:
        values = _taken(ar, index, vals.shape)
    else:
        values = ns.take(ar, np.asarray(index, dtype=np.intp), axis=axis)
    out = [values] + ([_int_array(index)] if return_index else []) + \
        [_int_array(r) for r in res[2:]]
    return out[0] if len(out) == 1 else tuple(out)


def _unique_named(name, fields):
    np_fn = getattr(np, name)

    def f(x):
        if not recording([x]):
            return _numpy(name, (x,))
        x = ns.asarray(x)
        res = np_fn(to_numpy(x))
        first = res if not fields else res[0]
        values = _taken(x, _first_positions(np.ravel(to_numpy(x)), np.ravel(first)),
                        first.shape)
        if not fields:
            return values
        return type(res)(values, *[_int_array(r) for r in res[1:]])
    f.__name__ = name
    f.__doc__ = f"NumPy's ``{name}`` (values recorded from the input's first occurrences)."
    return f


unique_values = _unique_named("unique_values", False)
unique_counts = _unique_named("unique_counts", True)
unique_inverse = _unique_named("unique_inverse", True)
unique_all = _unique_named("unique_all", True)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """NumPy's ``intersect1d``: the common values taken from ``ar1``."""
    if not recording([ar1, ar2]):
        return _numpy("intersect1d", (ar1, ar2), {"assume_unique": assume_unique,
                                                  "return_indices": return_indices})
    ar1, ar2 = ns.asarray(ar1), ns.asarray(ar2)
    res = np.intersect1d(to_numpy(ar1), to_numpy(ar2), assume_unique, return_indices=True)
    vals, i1 = res[0], res[1]
    values = _taken(ar1, i1, vals.shape)
    if values.dtype != vals.dtype:
        values = values.astype(vals.dtype)
    if not return_indices:
        return values
    return values, _int_array(i1), _int_array(res[2])


def union1d(ar1, ar2):
    """NumPy's ``union1d``: ``unique`` of both, flattened."""
    if not recording([ar1, ar2]):
        return _numpy("union1d", (ar1, ar2))
    both = ns.concatenate([ns.ravel(ns.asarray(ar1)), ns.ravel(ns.asarray(ar2))])
    return unique(both)


# --- histogram -------------------------------------------------------------------------------

def _edges(a, bins, range_, weights, np_edges):
    """The bin edges, recorded: ``linspace`` of ``range`` or of ``min(a)``, ``max(a)``
    (NumPy's widening of an empty range by 0.5 decided on the values) for an integer
    ``bins``, the given edges for an array.  None for a string ``bins``."""
    if isinstance(bins, str):
        return None
    if np.ndim(bins) == 0:
        n = int(bins)
        if range_ is not None:
            first, last = ns.asarray(range_[0]) * 1.0, ns.asarray(range_[1]) * 1.0
        elif a.size == 0:
            first, last = ns.asarray(0.0), ns.asarray(1.0)
        else:
            first, last = ns.min(a) * 1.0, ns.max(a) * 1.0
        if float(np_edges[0]) != float(to_numpy(first)):          # (first == last)
            first, last = first - 0.5, last + 0.5
        # (numpy.linspace's formula: start + k * step, the last one stop)
        step = (last - first) / n
        inner = ns.asarray(np.arange(n, dtype=float)) * step + first
        edges = ns.concatenate([inner, ns.reshape(last, (1,))])
        return edges.astype(np_edges.dtype)
    return ns.asarray(bins).astype(np_edges.dtype)


def _histogram_parts(a, bins, range_, weights):
    a = ns.asarray(a)
    wv = None if weights is None else to_numpy(weights)
    av = to_numpy(a)
    counts, np_edges = np.histogram(av, bins, range_, weights=wv)
    return a, av, counts, np_edges


def histogram(a, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """NumPy's ``histogram`` (see the module docstring for what is recorded)."""
    if not recording([a, weights, bins, range]) or isinstance(bins, str):
        return _numpy("histogram", (a,), {"bins": bins, "range": range, "density": density,
                                          "weights": weights})
    a, av, counts, np_edges = _histogram_parts(a, bins, range, weights)
    edges = _edges(a, bins, range, weights, np_edges)
    nb = np_edges.shape[0] - 1
    if weights is None:
        hist = ns.asarray(counts)
    else:
        w = ns.ravel(ns.asarray(weights))
        flat = np.ravel(av)
        idx = np.searchsorted(np_edges, flat, side="right") - 1
        idx[flat == np_edges[-1]] = nb - 1
        keep = np.nonzero((idx >= 0) & (idx < nb) & (flat >= np_edges[0]) &
                          (flat <= np_edges[-1]))[0]
        hist = ns.zeros(nb, counts.dtype)
        ns.add.at(hist, idx[keep], ns.take(w, keep).astype(counts.dtype))
    if density:
        db = ns.diff(edges).astype(float)
        hist = hist / db / ns.sum(hist)
    return hist, edges


def histogram_bin_edges(a, bins=10, range=None, weights=None):  # noqa: A002
    """NumPy's ``histogram_bin_edges`` (recorded for an integer or array ``bins``)."""
    if not recording([a, bins, range]) or isinstance(bins, str):
        return _numpy("histogram_bin_edges", (a,), {"bins": bins, "range": range,
                                                    "weights": weights})
    a = ns.asarray(a)
    np_edges = np.histogram_bin_edges(to_numpy(a), bins, range,
                                      None if weights is None else to_numpy(weights))
    return _edges(a, bins, range, weights, np_edges)


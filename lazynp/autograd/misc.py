"""autograd's ``autograd.misc`` helpers: :func:`flatten` and :func:`const_graph`.

:func:`flatten` turns a pytree (nested tuples, lists and dicts) of arrays and scalars into
one 1-D vector and returns the function that puts a vector back into that tree
(autograd's ``flatten``, JAX's ``ravel_pytree``): optimizers written for flat vectors then
work on structured parameters.  Both directions are lazynp ops, so gradients flow through
them.

:func:`const_graph` runs a function's recorded graph again on later calls instead of its
Python code (autograd's ``const_graph``); here it is :func:`lazynp.jit` over the function
with its bound arguments, and Python scalars are passed as 0-d arrays so that a new value
does not make a new trace.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..jit import jit as _jit
from .._numpy import namespace as lnp
from ..array.ndarray import ndarray

__all__ = ["flatten", "const_graph"]


def _leaves(value, out: list) -> Callable:
    """Append the leaves of ``value`` to ``out`` (dict keys sorted, as autograd) and return
    the function that rebuilds ``value``'s structure from an iterator of leaves."""
    if isinstance(value, (list, tuple)) and not isinstance(value, ndarray):
        makers = [_leaves(v, out) for v in value]
        kind = type(value)
        if kind not in (list, tuple):          # a namedtuple: its fields positionally
            return lambda it: kind(*(m(it) for m in makers))
        return lambda it: kind(m(it) for m in makers)
    if isinstance(value, dict):
        keys = sorted(value)
        makers = [_leaves(value[k], out) for k in keys]
        return lambda it: {k: m(it) for k, m in zip(keys, makers)}
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"lazynp.autograd.misc.flatten: a leaf must be an array or a number, "
                        f"got {type(value).__name__}")
    out.append(value)
    return lambda it: next(it)


def flatten(value: Any) -> tuple:
    """Flatten a pytree of arrays and numbers to one 1-D array (autograd's ``flatten``).

    Parameters
    ----------
    value : pytree
        Nested tuples, lists and dicts (keys sortable) with arrays or numbers as leaves.

    Returns
    -------
    flat : ndarray
        The raveled leaves concatenated in order (dict entries in sorted key order); its
        dtype is the leaves' common type (``float64`` when there are no leaves).
    unflatten : callable
        ``unflatten(vector)`` gives the tree back with the vector's values: each leaf has its
        original shape and the vector's dtype (as autograd, mixed dtypes are not kept);
        a number leaf comes back as a 0-d array.

    Raises
    ------
    TypeError
        A leaf that is not an array or a number (``None``, a string).
    ValueError
        ``unflatten`` of a vector whose shape is not ``flat``'s.

    Examples
    --------
    >>> import lazynp as np
    >>> from lazynp.autograd.misc import flatten
    >>> flat, unflatten = flatten({"w": np.ones((2, 2)), "b": 3.0})
    >>> flat
    array([3., 1., 1., 1., 1.])
    >>> unflatten(flat * 2)["w"]
    array([[2., 2.],
           [2., 2.]])
    """
    leaves: list = []
    build = _leaves(value, leaves)
    arrays = [lnp.asarray(x) for x in leaves]
    shapes = [a.shape for a in arrays]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    flat = lnp.concatenate([lnp.ravel(a) for a in arrays]) if arrays else lnp.zeros(0)
    total = sum(sizes)

    def unflatten(vector):
        vector = lnp.asarray(vector)
        if vector.shape != (total,):
            raise ValueError(f"lazynp.autograd.misc.flatten: unflatten expects a vector of "
                             f"shape ({total},), got {vector.shape}")
        parts = []
        start = 0
        for shape, size in zip(shapes, sizes):
            parts.append(lnp.reshape(vector[start:start + size], shape))
            start += size
        return build(iter(parts))

    return flat, unflatten


def _as_traceable(x):
    """A Python number as a 0-d array (jit keys Python numbers by value)."""
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, ndarray):
        return lnp.asarray(x)
    return x


def const_graph(fun: Callable, *args, **kwargs) -> Callable:
    """``fun`` with ``args``/``kwargs`` bound, traced on its first call and replayed after
    (autograd's ``const_graph``).

    Parameters
    ----------
    fun : callable
        A function of arrays written with lazynp functions.
    *args, **kwargs
        Leading positional and keyword arguments bound now (constants of the graph).

    Returns
    -------
    callable
        ``wrapped(*rest)`` = ``fun(*args, *rest, **kwargs)``, computed by a compiled plan of
        its recorded graph (:func:`lazynp.jit`): the Python code of ``fun`` runs again only
        for arguments of a new structure, shape or dtype (Python numbers are passed as 0-d
        arrays, so their values do not make new traces).  Unlike autograd's, Python control
        flow on an argument's value is not silently frozen: ``lazynp.jit`` refuses it.

    Examples
    --------
    >>> import lazynp as np
    >>> from lazynp.autograd.misc import const_graph
    >>> f = const_graph(lambda a, x: np.sin(x) * a, 2.0)
    >>> float(f(0.5))
    0.958851077208406
    """
    bound = functools.partial(fun, *args, **kwargs)
    compiled = _jit(lambda *rest: bound(*rest))

    @functools.wraps(fun)
    def wrapped(*rest):
        return compiled(*[_as_traceable(x) for x in rest])
    return wrapped

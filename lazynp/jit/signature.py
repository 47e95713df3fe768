"""The signature of a :class:`lazynp.jit` call: one key per argument (pytree structure,
shapes and dtypes of the array leaves, values of the other leaves), and, for
``explain()``, keys in words and how two keys differ."""
from __future__ import annotations

import numpy as np

from ..array.ndarray import ndarray

__all__ = ["argument_key", "describe", "diff_keys"]


def argument_key(a, leaves: list):
    """The signature key of one argument ``a`` (hashable: structure, shapes and dtypes of
    its arrays, values of its other leaves); its arrays' values are appended to
    ``leaves``."""
    t = type(a)
    if t is np.ndarray:
        leaves.append(a)
        return (a.shape, a.dtype)
    if t is ndarray:
        v = a._value()
        leaves.append(v)
        return (v.shape, v.dtype)
    if t is tuple or t is list:
        return (t, tuple([argument_key(x, leaves) for x in a]))
    if t is dict:
        return (dict, tuple(a), tuple([argument_key(a[k], leaves) for k in a]))
    if isinstance(a, np.generic):
        v = np.asarray(a)
        leaves.append(v)
        return (v.shape, v.dtype)
    if isinstance(a, ndarray):
        return argument_key(a._value(), leaves)
    if isinstance(a, np.ndarray):
        return argument_key(np.asarray(a), leaves)
    try:
        hash(a)
    except TypeError:
        raise TypeError(f"lazynp.jit: cannot use an argument of type {t.__name__} (use arrays, "
                        f"Python scalars, tuples, lists, dicts, or mark it static)") from None
    return ("const", t, a)


def describe(k) -> str:
    """A key of :func:`argument_key` in words (``"shape (3,) float64"``)."""
    if type(k) is tuple and len(k) == 2 and type(k[0]) is tuple and isinstance(k[1], np.dtype):
        return f"shape {k[0]} {k[1]}"
    if type(k) is tuple and k and k[0] == "const":
        return f"constant {k[2]!r}"
    if type(k) is tuple and k and k[0] == "static":
        return f"static value {k[1]!r}"
    if type(k) is tuple and k and k[0] in (tuple, list):
        return f"{k[0].__name__} of {len(k[1])}"
    if type(k) is tuple and k and k[0] is dict:
        return f"dict with keys {list(k[1])}"
    return repr(k)


def diff_keys(old, new, path: str, out: list) -> None:
    """Append to ``out`` how key ``new`` differs from key ``old`` (one line per
    difference; ``path`` names the argument)."""
    if old == new:
        return
    is_arr = lambda k: type(k) is tuple and len(k) == 2 and type(k[0]) is tuple and \
        isinstance(k[1], np.dtype)  # noqa: E731
    if is_arr(old) and is_arr(new):
        if old[0] != new[0]:
            out.append(f"{path} shape {old[0]} -> {new[0]}")
        if old[1] != new[1]:
            out.append(f"{path} dtype {old[1]} -> {new[1]}")
        return
    if type(old) is tuple and type(new) is tuple and old and new and old[0] == new[0] and \
            old[0] in (tuple, list) and len(old[1]) == len(new[1]):
        for j, (a, b) in enumerate(zip(old[1], new[1])):
            diff_keys(a, b, f"{path}[{j}]", out)
        return
    if type(old) is tuple and type(new) is tuple and old and new and old[0] is dict and \
            new[0] is dict and old[1] == new[1]:
        for kk, a, b in zip(old[1], old[2], new[2]):
            diff_keys(a, b, f"{path}[{kk!r}]", out)
        return
    out.append(f"{path} {describe(old)} -> {describe(new)}")

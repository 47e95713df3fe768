"""Flush plans: the fusion and kernel layout of a device flush, kept per graph structure.

A loop that records the same work on every iteration (``a * b + c * d - e * 0.5`` then
``evaluate``) gives flushes that differ only in their buffers and constant values.  The
first flush of a structure runs the fusion pass (:func:`lazynp.core.fusion.fuse`) and works
out each kernel's layout (inputs, constants, outputs, broadcasting, launch grid) as usual,
and keeps the outcome as a *plan*: its items, each naming its nodes by *slot* (a position in
the flush's topological order, or in the list of already computed inputs it reads).  A later
flush whose :func:`structure` is equal replays the plan: it binds the new nodes' buffers and
constants to the kept layouts, with no fusion pass and no layout work.

The structure holds everything the fusion pass and the layout read from the nodes: each
node's op, dtype, shape, device, parameters, whether its value must outlive the flush, how
many nodes read it, and each argument as a slot (a node of the flush, or a computed input
with its shape, dtype and view parameters) or as a constant's *kind*: its type, its dtype,
the ranges a Python int fits (whether a kernel may take it: NumPy 2 compares with an
out-of-range int exactly) and, for ``power``, whether it is 2 (``x ** 2`` becomes ``x * x``).
Constant values themselves are kernel arguments, read from the nodes at each replay.  A
flush with anything the structure cannot name (an array argument, a node recorded under
``numpy.errstate``) is not planned: it runs the fusion pass every time.
"""
from __future__ import annotations

import numpy as np

from .._base import counters as _counters

#: plans kept at most; the table is emptied when full (a loop reuses a few structures)
MAX_PLANS = 512
STATS = {"device_flush_plans": 0, "device_flush_replays": 0}
_plans: dict = {}

_SCALARS = (bool, float, complex)
_SIMPLE = frozenset({bool, int, float, complex, str, type(None)})
# (a Python int's kind: the smallest of these bit widths its magnitude fits; NumPy 2's
# range checks against int8..uint64 all follow from it and the sign)
_INT_WIDTHS = (7, 8, 15, 16, 31, 32, 63, 64)


class Unplannable(Exception):
    """Raised inside :func:`structure` for a flush it cannot name."""


def int_kind(v: int) -> tuple:
    """The sign and width class of a Python int: two ints of one kind fit the same
    integer dtypes."""
    neg = v < 0
    bits = (~v if neg else v).bit_length()
    for w in _INT_WIDTHS:
        if bits <= w:
            return (neg, w)
    return (neg, None)


def _typed(v):
    """A hashable key of a parameter value that tells ``1``, ``1.0`` and ``True`` apart."""
    t = type(v)
    if t in _SIMPLE:
        return (t, v)
    if t is tuple:
        return (tuple,) + tuple(_typed(x) for x in v)
    if isinstance(v, np.dtype):
        return (np.dtype, v)
    if isinstance(v, np.generic):
        return (t, v)
    raise Unplannable


def params_key(p):
    if p is None:
        return None
    return tuple((k, _typed(v)) for k, v in p.items())


def constant_key(a, op) -> tuple:
    """What of a constant argument the fusion pass and the kernel source depend on (its
    value is a kernel argument)."""
    t = type(a)
    power = op.name == "power"
    if t is int:
        return (int, int_kind(a), power and a == 2)
    if t in _SCALARS:
        return (t, power and a == 2)
    if isinstance(a, np.generic):
        return (t, a.dtype, power and bool(a == 2))
    return (_typed(a),)


def structure(order: list, node_type, view_op):
    """``(key, table, slot_of)`` of a flush's topological ``order`` (after the flush marked
    which values outlive it), or None when it cannot be planned.  ``table``: the nodes by
    slot (``order``, then the computed nodes the flush reads); ``slot_of``: id -> slot."""
    slot_of = {id(n): i for i, n in enumerate(order)}
    table = list(order)
    key = []
    app = key.append
    try:
        for n in order:
            if n.errstate is not None:
                return None
            op = n.op
            app(op)
            app(n.dtype)
            app(n.shape)
            app(n.device.name)
            app(n.needed)
            app(n.use_count)
            app(params_key(n.params))
            args = n.args
            app(len(args))
            for a in args:
                if type(a) is node_type:
                    s = slot_of.get(id(a))
                    if s is None:
                        s = slot_of[id(a)] = len(table)
                        table.append(a)
                        app(("x", a.shape, a.dtype, a.device.name,
                             params_key(a.params) if a.op is view_op else None))
                    app(s)
                else:
                    app(constant_key(a, op))
    except Unplannable:
        return None
    return tuple(key), table, slot_of


def lookup(key):
    plan = _plans.get(key)
    if plan is not None:
        STATS["device_flush_replays"] += 1
    return plan


def keep(key, steps: list) -> None:
    if len(_plans) >= MAX_PLANS:
        _plans.clear()
    _plans[key] = tuple(steps)
    STATS["device_flush_plans"] += 1


def clear() -> None:
    """Forget every kept flush plan (the next flush of each structure fuses again)."""
    _plans.clear()


_counters.register_table(STATS)

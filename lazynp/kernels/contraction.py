"""A sum of a product of two broadcast arrays, run as a contraction (``numpy.tensordot``).

``sum(x[:, i:i+K, j:j+K, :, None] * w, axis=(1, 2, 3))`` multiplies two arrays broadcast
against each other and sums over axes both of them span: a tensor contraction.  A fused
kernel (or NumPy) visits every element of the broadcast product, one multiply-add each,
while BLAS reuses each loaded element across a block of the other operand.  The rule
follows from the work's cost: the product's elements (multiply-adds) per element read or
written (both operands and the result), its *arithmetic intensity*.  From
:data:`MIN_INTENSITY` the contraction runs through ``tensordot``; below it each element is
used about once, and the fused kernel's single pass is as good.

Values: ``tensordot`` sums in BLAS's order, another order than NumPy's pairwise sum, within
the same rounding bound (README, "What differs from NumPy": fused reductions).  A result
that is not finite is recomputed on NumPy (the caller's fallback), so overflow, ``inf`` and
``nan`` give NumPy's values and warnings.
"""
from __future__ import annotations

import math

import numpy as np

from .._base import counters as _counters

#: the product's elements per element read or written from which the contraction runs on
#: BLAS.  Measured 2026-12-07 on the 2-core machine, CPU time of ``sum(a[:, :, None] *
#: b[None], axis=1)`` (float64, lazy policy; fused kernel / tensordot, ms): intensity 1.0
#: 0.44/0.31 (4000x64 by 64x1), 0.18/0.10 (100x1000 by 1000x1) but 0.16/0.24 (1000x100 by
#: 100x1); 1.3 0.05/0.05; 1.9 0.57/0.17 and 0.65/0.27; 2.6 0.07/0.05; 3.8 0.42/0.17; 7.1
#: 0.40/0.15; 12.5 0.52/0.19; 12.8 3.93/0.35; 28 0.84/0.13.  (Every contraction has an
#: intensity of about 1 or more: one with a free axis on one side only is a matrix-vector
#: product.)
MIN_INTENSITY = 2.0

#: the dtypes BLAS computes (others stay on the fused kernel)
DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))

STATS = {"contractions_run": 0, "contractions_rejected": 0}


def plan(shape: tuple, a_shape: tuple, b_shape: tuple, red_axes: tuple):
    """``(a_axes, b_axes, a_keep, b_keep, perm)`` for ``sum(a * b, axis=red_axes)`` over
    the broadcast ``shape`` as ``tensordot(a', b', (a_axes, b_axes)).transpose(perm)``,
    where ``a'`` and ``b'`` are ``a`` and ``b`` without the dimensions of ``shape`` they
    do not span (``a_keep``/``b_keep``: the kept dimensions of ``a``/``b``, as dimensions
    of ``shape``); None when it is not a contraction: an axis both span and the result
    keeps (a batch axis), a summed axis only one of them spans, or too little work per
    element (:data:`MIN_INTENSITY`)."""
    nd = len(shape)
    a_full = (1,) * (nd - len(a_shape)) + tuple(a_shape)
    b_full = (1,) * (nd - len(b_shape)) + tuple(b_shape)
    a_keep, b_keep, contracted = [], [], []
    for d in range(nd):
        if shape[d] == 1:
            continue
        in_a, in_b = a_full[d] != 1, b_full[d] != 1
        if d in red_axes:
            if not (in_a and in_b):
                return None
            contracted.append(d)
        elif in_a and in_b:
            return None
        elif in_a:
            a_keep.append(d)
        else:
            b_keep.append(d)
    if not contracted:
        return None
    work = math.prod(shape)
    moved = math.prod(shape[d] for d in a_keep + contracted) + \
        math.prod(shape[d] for d in b_keep + contracted) + \
        math.prod(shape[d] for d in a_keep + b_keep)
    if work < MIN_INTENSITY * moved:
        return None
    # tensordot's result: a's free axes, then b's, each in order; the sum keeps shape's
    free = a_keep + b_keep
    perm = tuple(sorted(range(len(free)), key=lambda k: free[k]))
    a_sub = sorted(a_keep + contracted)
    b_sub = sorted(b_keep + contracted)
    a_axes = tuple(a_sub.index(d) for d in contracted)
    b_axes = tuple(b_sub.index(d) for d in contracted)
    return a_axes, b_axes, tuple(a_keep), tuple(b_keep), perm


def _squeezed(v: np.ndarray, nd: int, keep: list) -> np.ndarray:
    """``v`` (broadcast to ``nd`` dimensions) with only the dimensions ``keep``."""
    v = v.reshape((1,) * (nd - v.ndim) + v.shape) if v.ndim < nd else v
    return v.reshape(tuple(v.shape[d] for d in keep)) if v.ndim else v


def try_run(group, red_axes: tuple, node_type, value_of, stored) -> bool:
    """Run ``group`` -- one ``multiply`` of two arrays (graph nodes of ``node_type``)
    closed by a ``sum`` over ``red_axes`` -- as a contraction when :func:`plan` says it is
    one and pays, setting the sum's value; False to leave it to the fused kernel (or
    NumPy).  ``value_of(node)``: a node's array; ``stored(member)``: whether the product
    is read outside the group (then it is computed, not contracted away)."""
    red = group.reduction
    if red is None or red.op.name != "sum" or len(group.members) != 1:
        return False
    m = group.members[0]
    if m.op.name != "multiply" or len(m.args) != 2 or stored(m) or m.dtype not in DTYPES or \
            red.dtype != m.dtype or any(getattr(a, "dtype", None) != m.dtype for a in m.args):
        return False
    a_node, b_node = m.args
    if type(a_node) is not node_type or type(b_node) is not node_type:
        return False
    shape = group.shape
    p = plan(shape, a_node.shape, b_node.shape, red_axes)
    if p is None:
        return False
    a_axes, b_axes, a_keep, b_keep, perm = p
    nd = len(shape)
    a_val, b_val = value_of(a_node), value_of(b_node)
    contracted = [d for d in range(nd) if d in red_axes and shape[d] != 1]
    a2 = _squeezed(a_val, nd, sorted(a_keep + tuple(contracted)))
    b2 = _squeezed(b_val, nd, sorted(b_keep + tuple(contracted)))
    with np.errstate(all="ignore"):
        r = np.tensordot(a2, b2, axes=(a_axes, b_axes))
    if perm != tuple(range(len(perm))):
        r = r.transpose(perm)
    if not np.isfinite(r).all():
        # (overflow, inf or nan: NumPy computes it, with its values and warnings)
        STATS["contractions_rejected"] += 1
        return False
    r = np.ascontiguousarray(r, dtype=red.dtype).reshape(red.shape)
    red.value = r
    STATS["contractions_run"] += 1
    return True


_counters.register_table(STATS)

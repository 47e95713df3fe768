"""The op record and the table that holds every op.

One :class:`Op` per operation, with all its rules in one place: how to infer the output
shape/dtype at record time (raising NumPy's exception there), the NumPy reference
implementation, the scalar expression used by the kernel generators, which input the output
may overwrite, whether the output shape depends on data, and the facts the execution policy
and the kernels read (can it raise on values, does its kernel form call libm).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

#: the batching rules an op may declare (:attr:`Op.batch`)
BATCH_RULES = ("elementwise", "reduction", "reduction_flat", "tuple_get")
KINDS = ("elementwise", "reduction", "view", "index", "contraction", "opaque", "creation", "write")


@dataclass(eq=False)
class Op:
    """One operation of the op table.

    Attributes
    ----------
    name : str
        Unique name (``"add"``, ``"sum"``, ``"setitem"``...).
    kind : str
        One of :data:`KINDS`.
    impl : callable
        NumPy reference implementation ``impl(*arg_values, **params) -> numpy.ndarray``.
        Ops of kind ``"write"`` mutate and return their first argument.
    expr : str or None
        Scalar expression template for elementwise ops (``"({0} + {1})"``), shared by the
        CPU and CUDA code generators.
    inplace : tuple of int
        Inputs whose storage the output may take over.
    data_dependent : bool
        True when the output shape depends on input values (forces evaluation).
    impl_out : callable or None
        ``impl_out(out, *arg_values, **params)`` writes the result into ``out``, a C-contiguous
        array of the node's shape and dtype: lets the executor give large results a pooled
        buffer (no fresh page faults for repeated work).
    raises_on_values : bool
        True when the op can raise or warn depending on its input *values* (floating-point
        warnings such as divide by zero or overflow, integer division by zero,
        ``LinAlgError``, cast warnings, out-of-bounds lazy indices).  Recorded where the
        user's code handles errors or warnings (a ``try``/``with`` block), such an op runs
        at the call, as in NumPy (the decision: :func:`lazynp.core.policy.run_at_call`).
    fp_errors_only : bool
        True when the only value-dependent errors and warnings of the op are NumPy's
        floating-point ones, which ``np.errstate`` governs (ufuncs, casts, sums): where they
        are ignored, the op is recorded even inside a try/with block.
    calls_libm : bool
        True when the op's kernel form calls a libm math function (exp, sin, a general
        power...): NumPy's own loops (SIMD ones, its float32 sin/cos) can give other bits,
        so medium work of it is left to NumPy (:func:`lazynp.core.policy.tree_op`) and trees
        holding it to the fusion pass (kernels/tree.py).
    batch : str or None
        How :func:`lazynp.vmap` batches the op (its batching rule, one of :data:`BATCH_RULES`):
        ``"elementwise"``: the batch is a new leading axis of every array argument, which
        broadcast against each other as before; ``"reduction"``: the same, the op's ``axis``
        parameter shifted past the batch axis (``None``: every axis but the batch one);
        ``"reduction_flat"``: a reduction or scan whose ``axis=None`` flattens its input
        (``argmax``, ``cumsum``): each example is flattened on its own; ``"tuple_get"``:
        output ``i`` of a batched multi-output op.  ``None``: the rule, if any, is the one
        :mod:`lazynp.autograd.batching` keeps for the op's name (ops defined above this
        layer: views, indexing, NumPy function calls); an op with no rule runs once per
        example (counted in :func:`lazynp.stats`).
    """

    name: str
    kind: str
    impl: Callable[..., Any]
    expr: str | None = None
    inplace: tuple = ()
    data_dependent: bool = False
    ufunc: Any = None
    impl_out: Callable[..., Any] | None = None
    raises_on_values: bool = True
    fp_errors_only: bool = False
    calls_libm: bool = False
    batch: str | None = None
    extra: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<lazynp op {self.name} ({self.kind})>"


OPS: dict[str, Op] = {}


def register(op: Op) -> Op:
    """Add ``op`` to the table (names are unique)."""
    if op.kind not in KINDS:
        raise ValueError(f"unknown op kind {op.kind!r}")
    if op.batch is not None and op.batch not in BATCH_RULES:
        raise ValueError(f"unknown batching rule {op.batch!r}")
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} registered twice")
    OPS[op.name] = op
    return op


def get(name: str) -> Op:
    """Return the op called ``name``."""
    return OPS[name]

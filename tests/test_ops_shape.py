"""Views, copies, creation, contractions, advanced indexing and linalg against NumPy.

Views are checked for their *semantics* as well as their values: a lazy copy taken before a
write must keep the old values, a view must see a later write to its base, and a write
through a view must reach the base — exactly when NumPy's result is a view (NumPy decides:
``reshape`` of a non-contiguous array copies, ``a[1, 2]`` is a scalar, ``broadcast_to`` is
read-only...).
"""
from __future__ import annotations

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazynp
from strategies import DTYPES, NUMERIC_DTYPES, SETTINGS, arrays, check, dtypes, quiet, shapes

L = lazynp.asarray


def pattern(shape, dtype, seed=3):
    """Deterministic values of ``dtype`` that differ from typical drawn arrays."""
    n = int(numpy.prod(shape)) if shape else 1
    v = (numpy.arange(n) * 5 + seed) % 11 - 3
    return v.reshape(shape).astype(dtype)


def view_case(a, fn, *, kind="exact", raise_at_call=True):
    """``fn(mod, x)`` on NumPy and on lazynp, with NumPy's view/copy semantics.

    Each side: r = fn(x); keep a (lazy) copy of r; overwrite the base; then, when NumPy's r
    is an array, write through r (read-only views must raise the same class).  The copy, r,
    the base and the write's exception class must all agree.
    """
    decided = {}

    def side(mod, base):
        r = fn(mod, base)
        results = r if isinstance(r, (list, tuple)) else [r]
        pre = [mod.copy(x) for x in results]
        base[...] = pattern(base.shape, base.dtype, seed=1)
        if "write" not in decided:  # NumPy's side runs first and decides
            decided["write"] = [isinstance(x, numpy.ndarray) for x in results]
        write_exc = []
        for x, do in zip(results, decided["write"]):
            if not do:
                write_exc.append(None)
                continue
            try:
                x[...] = pattern(x.shape, x.dtype, seed=7)
                write_exc.append(None)
            except Exception as e:  # noqa: BLE001 - compared across both sides
                write_exc.append(type(e).__name__)
        return [pre, list(results), base, write_exc]

    return check(lambda: side(numpy, a.copy()), lambda: side(lazynp, L(a.copy())), kind=kind,
                 raise_at_call=raise_at_call)


def not_index_error(exc):
    """Errors that must be raised at the call even when index arrays are lazy (whose
    out-of-bounds values lazynp may only see when it runs)."""
    return not isinstance(exc, IndexError) or "out of bounds" not in str(exc)


def array_st(dtype_st=dtypes, shape_st=None, kind="small"):
    shape_st = shape_st if shape_st is not None else shapes(max_dims=3)
    return st.tuples(dtype_st, shape_st).flatmap(lambda t: arrays(t[0], t[1], kind=kind))


PRE = {  # the array a view function is applied to: contiguous or not
    "id": lambda x: x,
    "T": lambda x: x.T,
    "step": lambda x: x[..., ::2] if x.ndim else x,
    "rev": lambda x: x[::-1] if x.ndim else x,
}
pre_st = st.sampled_from(sorted(PRE))


# --- views ------------------------------------------------------------------------------------

@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_basic_indexing(data):
    a = data.draw(array_st(shape_st=shapes(max_dims=3, max_side=5)), label="a")
    if data.draw(st.booleans()):
        idx = data.draw(hnp.basic_indices(a.shape, min_dims=0, allow_newaxis=True,
                                          allow_ellipsis=True), label="index")
    else:  # slices with any steps (negative too), sometimes out-of-range ints
        idx = tuple(data.draw(st.one_of(st.slices(max(n, 1)), st.integers(-n - 1, n)),
                              label="item") for n in a.shape)
    view_case(a, lambda mod, x: x[idx])


@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_reshape(data):
    a = data.draw(array_st(shape_st=shapes(max_dims=3, max_side=4)), label="a")
    pre = data.draw(pre_st, label="pre")
    n = PRE[pre](a).size
    divisors = [d for d in range(1, n + 1) if n % d == 0] or [1]
    d = data.draw(st.sampled_from(divisors))
    target = data.draw(st.sampled_from([(-1,), (n,), (d, -1), (-1, d), (1, d, n // d),
                                        (d, n // d, 1), (n + 1,), (-1, -1), (2, -1), ()]),
                       label="shape")
    form = data.draw(st.sampled_from(["method", "method_args", "function", "order_F"]))

    def fn(mod, x):
        y = PRE[pre](x)
        if form == "method":
            return y.reshape(target)
        if form == "method_args":
            return y.reshape(*target) if target else y.reshape(())
        if form == "order_F":
            return mod.reshape(y, target, order="F")
        return mod.reshape(y, target)

    view_case(a, fn)


@pytest.mark.parametrize("name", ["ravel", "flatten", "ravel_fn", "T", "copy", "view"])
@settings(SETTINGS, max_examples=25)
@given(data=st.data())
def test_ravel_flatten_T_copy(name, data):
    a = data.draw(array_st(), label="a")
    pre = data.draw(pre_st, label="pre")
    fns = {"ravel": lambda mod, y: y.ravel(), "flatten": lambda mod, y: y.flatten(),
           "ravel_fn": lambda mod, y: mod.ravel(y), "T": lambda mod, y: y.T,
           "copy": lambda mod, y: y.copy(), "view": lambda mod, y: y.view()}
    view_case(a, lambda mod, x: fns[name](mod, PRE[pre](x)))


@st.composite
def axis_args(draw, ndim, name):
    ax = st.integers(-ndim - 1, ndim) if ndim else st.integers(-1, 1)
    if name == "transpose":
        if draw(st.booleans()):
            return (None,)
        perm = draw(st.permutations(range(ndim)))
        if ndim and draw(st.integers(0, 5)) == 0:
            perm = perm[:-1]  # wrong length -> ValueError
        return (tuple(perm),)
    if name == "swapaxes":
        return (draw(ax), draw(ax))
    if name == "moveaxis":
        return (draw(ax), draw(ax))
    if name == "expand_dims":
        return (draw(st.integers(-ndim - 2, ndim + 1)),)
    if name == "squeeze":
        return (draw(st.none() | ax),)
    if name == "flip":
        return (draw(st.none() | ax | hnp.valid_tuple_axes(ndim)),)
    if name == "diagonal":
        return (draw(st.integers(-3, 3)), draw(ax), draw(ax))
    if name == "rot90":
        return (draw(st.integers(-2, 5)),)
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["transpose", "swapaxes", "moveaxis", "expand_dims",
                                  "squeeze", "flip", "diagonal", "rot90"])
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_axis_views(name, data):
    a = data.draw(array_st(shape_st=shapes(max_dims=3, max_side=3)), label="a")
    pre = data.draw(pre_st, label="pre")
    args = data.draw(axis_args(a.ndim, name), label="args")
    view_case(a, lambda mod, x: getattr(mod, name)(PRE[pre](x), *args))


@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_broadcast_to_is_a_readonly_view(data):
    a = data.draw(array_st(shape_st=shapes(max_dims=2, max_side=3)), label="a")
    target = data.draw(hnp.broadcastable_shapes(a.shape, min_side=0) |
                       shapes(max_dims=3, max_side=3), label="shape")
    view_case(a, lambda mod, x: mod.broadcast_to(x, target))


@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_real_imag(data):
    a = data.draw(array_st(shape_st=shapes(max_dims=2)), label="a")
    which = data.draw(st.sampled_from(["real", "imag", "real_fn", "imag_fn"]))
    fns = {"real": lambda mod, x: x.real, "imag": lambda mod, x: x.imag,
           "real_fn": lambda mod, x: mod.real(x), "imag_fn": lambda mod, x: mod.imag(x)}
    view_case(a, fns[which])


@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_sliding_window_view(data):
    a = data.draw(array_st(shape_st=shapes(min_dims=1, max_dims=2, max_side=5)), label="a")
    if data.draw(st.booleans()):
        axis = None
        window = tuple(data.draw(st.integers(0, n + 1)) for n in a.shape)
    else:
        axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
        window = data.draw(st.integers(0, a.shape[axis] + 1))

    def fn(mod, x):
        if mod is numpy:
            return numpy.lib.stride_tricks.sliding_window_view(x, window, axis)
        return lazynp.lib.stride_tricks.sliding_window_view(x, window, axis)

    view_case(a, fn)


@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_split_parts_are_views(data):
    a = data.draw(array_st(shape_st=shapes(min_dims=1, max_dims=3, max_side=5)), label="a")
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    how = data.draw(st.one_of(st.integers(1, 4),
                              st.lists(st.integers(-1, 6), max_size=3).map(sorted)), label="how")
    name = data.draw(st.sampled_from(["split", "array_split"]))
    view_case(a, lambda mod, x: getattr(mod, name)(x, how, axis=axis))


@settings(SETTINGS, max_examples=25)
@given(data=st.data())
def test_view_chain_sees_every_write(data):
    """A view of a view of a base, with writes through each level, in one lazy graph."""
    a = data.draw(array_st(dtype_st=st.sampled_from(NUMERIC_DTYPES),
                           shape_st=shapes(min_dims=2, max_dims=2, min_side=2, max_side=5)))

    def side(mod, x):
        v = x.T[::-1]
        w = v[1:, ::2]
        x += 1
        w[...] = 0 if w.dtype.kind != "c" else 1j
        v[0] = 2
        s = x.sum(axis=0)
        x *= 3
        return [x, v, w, s]

    check(lambda: side(numpy, a.copy()), lambda: side(lazynp, L(a.copy())), kind="reduction")


# --- copies -----------------------------------------------------------------------------------

@st.composite
def joinable(draw, max_arrays=3):
    """Arrays for concatenate/stack: mostly compatible shapes, mixed dtypes."""
    ndim = draw(st.integers(0, 3))
    base = list(draw(shapes(min_dims=ndim, max_dims=ndim, max_side=3)))
    k = draw(st.integers(1, max_arrays))
    out = []
    for _ in range(k):
        s = list(base)
        if s and draw(st.booleans()):
            i = draw(st.integers(0, len(s) - 1))
            s[i] = draw(st.integers(0, 3))
        if draw(st.integers(0, 9)) == 0:
            s = s[1:]
        out.append(draw(arrays(draw(dtypes), tuple(s), kind="small")))
    return out


@pytest.mark.parametrize("name", ["concatenate", "stack", "vstack", "hstack", "column_stack",
                                  "dstack"])
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_joining(name, data):
    arrs = data.draw(joinable(), label="arrays")
    kw = {}
    if name in ("concatenate", "stack"):
        kw["axis"] = data.draw(st.none() | st.integers(-3, 3)) if name == "concatenate" else \
            data.draw(st.integers(-3, 3))
    forms = data.draw(st.lists(st.sampled_from(["lazy", "numpy", "list"]), min_size=len(arrs),
                               max_size=len(arrs)), label="forms")

    def conv(x, f):
        return {"lazy": L, "numpy": lambda y: y.copy(), "list": lambda y: y.tolist()}[f](x)

    def fn(mod, *xs):
        return getattr(mod, name)(list(xs), **kw)

    check(lambda: fn(numpy, *[x if f != "list" else x.tolist() for x, f in zip(arrs, forms)]),
          lambda: fn(lazynp, *[conv(x, f) for x, f in zip(arrs, forms)]),
          kind="exact", raise_at_call=True)


@st.composite
def copy_case(draw, name):
    a = draw(array_st(shape_st=shapes(max_dims=3, max_side=4)))
    nd = a.ndim
    ax = st.integers(-nd - 1, nd) if nd else st.just(None)
    if name == "roll":
        shift = draw(st.integers(-5, 5) | st.tuples(st.integers(-5, 5), st.integers(-5, 5)))
        axis = draw(st.none() | ax) if not isinstance(shift, tuple) else \
            draw(st.tuples(ax, ax) if nd else st.none())
        return a, (shift,), {"axis": axis}
    if name == "tile":
        return a, (draw(st.integers(0, 3) | st.tuples(*[st.integers(0, 2)] *
                                                       draw(st.integers(1, 4)))),), {}
    if name == "repeat":
        rep = draw(st.integers(0, 3) | st.lists(st.integers(0, 3), min_size=1, max_size=5))
        return a, (rep,), {"axis": draw(st.none() | ax)}
    if name == "pad":
        width = draw(st.integers(0, 2) | st.tuples(st.integers(0, 2), st.integers(0, 2)))
        mode = draw(st.sampled_from(["constant", "edge", "reflect", "wrap", "symmetric"]))
        return a, (width,), {"mode": mode}
    if name == "take":
        n = a.size if nd else 1
        idx = draw(hnp.arrays(numpy.intp, shapes(max_dims=2, max_side=3),
                              elements=st.integers(-n - 1, n)))
        kw = {"axis": draw(st.none() | ax)}
        if draw(st.booleans()):
            # NumPy's mode="wrap" loops forever on a negative index into an empty axis
            # when the result is empty (numpy.take(zeros((3, 0, 0)), [-1], 1, mode="wrap"))
            kw["mode"] = draw(st.sampled_from(["wrap", "clip"] if a.size else ["clip"]))
        return a, (idx,), kw
    if name == "take_along_axis":
        axis = draw(ax) if nd else 0
        ishape = list(a.shape)
        if nd and -nd <= axis < nd:
            ishape[axis] = draw(st.integers(0, 4))
        m = a.shape[axis] if nd and -nd <= axis < nd else 1
        idx = draw(hnp.arrays(numpy.intp, tuple(ishape), elements=st.integers(-m, max(m - 1, 0))))
        return a, (idx,), {"axis": axis}
    if name in ("sort", "argsort"):
        kw = {"axis": draw(st.none() | ax)} if nd else {}
        if draw(st.booleans()):
            kw["kind"] = "stable"
        return a, (), kw
    if name == "diff":
        return a, (), {"n": draw(st.integers(1, 3)), "axis": draw(ax) if nd else -1}
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["roll", "tile", "repeat", "pad", "take", "take_along_axis",
                                  "sort", "argsort", "diff"])
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_copy_functions(name, data):
    a, args, kw = data.draw(copy_case(name), label="case")
    lazy_args = tuple(L(x) if isinstance(x, numpy.ndarray) and data.draw(st.booleans())
                      else x for x in args)
    lazy_index = any(isinstance(x, lazynp.ndarray) for x in lazy_args)
    check(lambda: getattr(numpy, name)(a, *args, **kw),
          lambda: getattr(lazynp, name)(L(a), *lazy_args, **kw),
          kind="exact", raise_at_call=not_index_error if lazy_index else True)
    # the result is a copy: later writes to the input do not change it
    view_case(a, lambda mod, x: getattr(mod, name)(x, *args, **kw))


def test_diff_n0_returns_the_input_itself():
    """NumPy documents that ``diff(a, n=0)`` returns ``a`` as-is (so later writes show)."""
    a = numpy.arange(4.0)
    view_case(a, lambda mod, x: mod.diff(x, n=0))
    view_case(a.reshape(2, 2), lambda mod, x: mod.diff(x, n=0, axis=0))


@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_sort_method_is_in_place(data):
    a = data.draw(array_st(dtype_st=st.sampled_from([d for d in DTYPES if d.kind != "c"]),
                           shape_st=shapes(min_dims=1, max_dims=3)))
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))

    def side(mod, x):
        v = x[...]
        r = x.sort(axis=axis)
        return [r, x, v]

    check(lambda: side(numpy, a.copy()), lambda: side(lazynp, L(a.copy())), kind="exact")


# --- creation ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "full"])
@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_creation(name, data):
    shape = data.draw(shapes(max_dims=3) | st.integers(0, 4), label="shape")
    kw = {}
    if data.draw(st.booleans()):
        kw["dtype"] = data.draw(dtypes)
    args = (shape,)
    if name == "full":
        args += (data.draw(st.booleans() | st.integers(-3, 300) | st.floats(-5, 5) |
                           st.complex_numbers(max_magnitude=5)),)
    if name == "empty":  # values are undefined: shape and dtype only
        def compare(e, a):
            assert (a.shape, a.dtype) == (e.shape, e.dtype)
        check(lambda: numpy.empty(*args, **kw), lambda: lazynp.empty(*args, **kw),
              compare=compare)
        return
    check(lambda: getattr(numpy, name)(*args, **kw), lambda: getattr(lazynp, name)(*args, **kw),
          kind="exact", raise_at_call=True)


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like", "full_like"])
@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_creation_like(name, data):
    a = data.draw(array_st(), label="a")
    kw = {}
    if data.draw(st.booleans()):
        kw["dtype"] = data.draw(dtypes)
    if data.draw(st.integers(0, 3)) == 0:
        kw["shape"] = data.draw(shapes(max_dims=2))
    args = (data.draw(st.integers(-3, 100) | st.floats(-5, 5) | st.booleans()),) \
        if name == "full_like" else ()

    def compare(e, a_):
        assert (a_.shape, a_.dtype) == (e.shape, e.dtype)

    check(lambda: getattr(numpy, name)(a, *args, **kw),
          lambda: getattr(lazynp, name)(L(a), *args, **kw), kind="exact", raise_at_call=True,
          compare=compare if name == "empty_like" else None)


@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_arange_linspace_logspace(data):
    name = data.draw(st.sampled_from(["arange", "linspace", "logspace"]))
    num = st.integers(-5, 10) | st.floats(-5, 10).map(lambda f: round(f, 2))
    kw = {}
    if name == "arange":
        args = tuple(data.draw(st.lists(num, min_size=1, max_size=3)))
        if data.draw(st.booleans()):
            kw["dtype"] = data.draw(dtypes)
    else:
        args = (data.draw(num), data.draw(num))
        kw["num"] = data.draw(st.integers(0, 7))
        kw["endpoint"] = data.draw(st.booleans())
        if data.draw(st.booleans()):
            kw["dtype"] = data.draw(st.sampled_from([numpy.float32, numpy.float64,
                                                     numpy.int64, numpy.complex128]))
    check(lambda: getattr(numpy, name)(*args, **kw), lambda: getattr(lazynp, name)(*args, **kw),
          raise_at_call=True)


@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_eye_identity_tri_diag(data):
    name = data.draw(st.sampled_from(["eye", "identity", "tri", "tril", "triu", "diag",
                                      "diagflat"]))
    n, m, k = data.draw(st.integers(0, 4)), data.draw(st.none() | st.integers(0, 4)), \
        data.draw(st.integers(-4, 4))
    dt = data.draw(dtypes)
    if name == "eye":
        check(lambda: numpy.eye(n, m, k, dtype=dt), lambda: lazynp.eye(n, m, k, dtype=dt),
              kind="exact")
    elif name == "identity":
        check(lambda: numpy.identity(n, dtype=dt), lambda: lazynp.identity(n, dtype=dt),
              kind="exact")
    elif name == "tri":
        check(lambda: numpy.tri(n, m, k, dtype=dt), lambda: lazynp.tri(n, m, k, dtype=dt),
              kind="exact")
    else:
        a = data.draw(arrays(dt, shapes(max_dims=3, max_side=4), kind="small"), label="a")
        view_case(a, lambda mod, x: getattr(mod, name)(x, k))


@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_meshgrid(data):
    xs = [data.draw(arrays(data.draw(dtypes), shapes(max_dims=1 if i % 2 else 2, max_side=4),
                           kind="small")) for i in range(data.draw(st.integers(0, 3)))]
    kw = {"indexing": data.draw(st.sampled_from(["xy", "ij"])),
          "sparse": data.draw(st.booleans())}
    check(lambda: numpy.meshgrid(*xs, **kw), lambda: lazynp.meshgrid(*[L(x) for x in xs], **kw),
          kind="exact", raise_at_call=True)


# --- contractions -----------------------------------------------------------------------------

CONTRACT_DTYPES = st.sampled_from([numpy.dtype(d) for d in (numpy.bool_, numpy.int8,
                                                            numpy.int32, numpy.int64,
                                                            numpy.float32, numpy.float64,
                                                            numpy.complex128)])


@st.composite
def matmul_operands(draw):
    """1-d, 2-d and batched operands, mostly with matching core dimensions."""
    n, k, m = (draw(st.integers(0, 3)) for _ in range(3))
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, min_side=0,
                                                   max_side=3))
    ka = k
    kb = k if draw(st.integers(0, 6)) else draw(st.integers(0, 4))
    a_shape = draw(st.sampled_from([(ka,), (n, ka), batch.input_shapes[0] + (n, ka)]))
    b_shape = draw(st.sampled_from([(kb,), (kb, m), batch.input_shapes[1] + (kb, m)]))
    if draw(st.integers(0, 15)) == 0:
        a_shape = ()
    a = draw(arrays(draw(CONTRACT_DTYPES), a_shape, kind="small"))
    b = draw(arrays(draw(CONTRACT_DTYPES), b_shape, kind="small"))
    return a, b


@settings(SETTINGS, max_examples=80)
@given(ab=matmul_operands(), form=st.sampled_from(["matmul", "@", "dot", "rmatmul_numpy"]))
def test_matmul_and_dot(ab, form):
    a, b = ab
    if form == "matmul":
        check(lambda: numpy.matmul(a, b), lambda: lazynp.matmul(L(a), L(b)), kind="reduction",
              raise_at_call=True)
    elif form == "@":
        check(lambda: a @ b, lambda: L(a) @ L(b), kind="reduction", raise_at_call=True)
    elif form == "rmatmul_numpy":  # numpy.ndarray @ lazynp.ndarray
        check(lambda: a @ b, lambda: a.copy() @ L(b), kind="reduction")
    else:
        check(lambda: numpy.dot(a, b), lambda: lazynp.dot(L(a), L(b)), kind="reduction",
              raise_at_call=True)


@settings(SETTINGS, max_examples=50)
@given(data=st.data())
def test_tensordot(data):
    a = data.draw(arrays(data.draw(CONTRACT_DTYPES), shapes(max_dims=3, max_side=3),
                         kind="small"), label="a")
    if data.draw(st.booleans()):
        n = data.draw(st.integers(0, min(a.ndim, 2)))
        b_shape = a.shape[a.ndim - n:] + data.draw(shapes(max_dims=2, max_side=3))
        axes = n
    else:
        k = data.draw(st.integers(0, min(a.ndim, 2)))
        axes_a = data.draw(st.permutations(range(a.ndim)))[:k]
        axes_a = [ax - a.ndim if data.draw(st.booleans()) else ax for ax in axes_a]
        extra = data.draw(shapes(max_dims=1, max_side=3))
        b_shape = tuple(a.shape[ax] for ax in axes_a) + extra
        axes_b = list(range(k))
        axes = (axes_a, axes_b) if k != 1 or data.draw(st.booleans()) else (axes_a[0], 0)
    if data.draw(st.integers(0, 6)) == 0 and b_shape:
        b_shape = (b_shape[0] + 1,) + b_shape[1:]  # mismatch -> ValueError
    b = data.draw(arrays(data.draw(CONTRACT_DTYPES), b_shape, kind="small"), label="b")
    check(lambda: numpy.tensordot(a, b, axes), lambda: lazynp.tensordot(L(a), L(b), axes),
          kind="reduction", raise_at_call=True)


EINSUM = ["ij,jk->ik", "ij,jk", "ii->i", "ii", "ij->ji", "ij", "ji", "i,i", "i,i->",
          "i,j->ij", "bij,bjk->bik", "ij->", "ijk->kj", "ij,ij->ij", "i,ij,j", "ik,kj->ij"]


@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_einsum(data):
    subs = data.draw(st.sampled_from(EINSUM), label="subscripts")
    ins = subs.split("->")[0].split(",")
    sizes = {c: data.draw(st.integers(0, 3)) for c in set("".join(ins))}
    ops = []
    for spec in ins:
        shape = tuple(sizes[c] for c in spec)
        if data.draw(st.integers(0, 12)) == 0 and shape:
            shape = (shape[0] + 1,) + shape[1:]  # mismatched operand -> ValueError
        ops.append(data.draw(arrays(data.draw(CONTRACT_DTYPES), shape, kind="small")))
    check(lambda: numpy.einsum(subs, *ops), lambda: lazynp.einsum(subs, *[L(o) for o in ops]),
          kind="reduction", raise_at_call=True)


@pytest.mark.parametrize("name", ["outer", "inner", "vdot", "trace", "kron", "cross"])
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_other_contractions(name, data):
    if name == "trace":
        a = data.draw(arrays(data.draw(CONTRACT_DTYPES), shapes(max_dims=3, max_side=3),
                             kind="small"))
        off = data.draw(st.integers(-3, 3))
        check(lambda: numpy.trace(a, off), lambda: lazynp.trace(L(a), off), kind="reduction",
              raise_at_call=True)
        check(lambda: a.trace(off), lambda: L(a).trace(off), kind="reduction",
              raise_at_call=True)
        return
    if name == "cross":
        sh = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
        last = [data.draw(st.sampled_from([2, 3, 3, 4])) for _ in range(2)]
        a_shape, b_shape = sh.input_shapes[0] + (last[0],), sh.input_shapes[1] + (last[1],)
    else:
        a_shape = data.draw(shapes(max_dims=2, max_side=3))
        b_shape = data.draw(shapes(max_dims=2, max_side=3))
        if name in ("inner", "vdot") and a_shape and data.draw(st.integers(0, 3)):
            b_shape = b_shape[:-1] + a_shape[-1:] if b_shape else a_shape[-1:]
        if name == "vdot" and data.draw(st.booleans()):
            b_shape = a_shape
    a = data.draw(arrays(data.draw(CONTRACT_DTYPES), a_shape, kind="small"), label="a")
    b = data.draw(arrays(data.draw(CONTRACT_DTYPES), b_shape, kind="small"), label="b")
    check(lambda: getattr(numpy, name)(a, b), lambda: getattr(lazynp, name)(L(a), L(b)),
          kind="reduction", raise_at_call=True)


# --- advanced indexing ------------------------------------------------------------------------

@st.composite
def advanced_index(draw, shape):
    """Integer arrays (sometimes out of bounds), boolean masks, mixed with slices."""
    nd = len(shape)
    kind = draw(st.sampled_from(["int", "int_pair", "int_slice", "bool_full", "bool_first",
                                 "list", "bool_bad"]))
    def ints(n, ishape=None):
        ishape = ishape if ishape is not None else draw(shapes(max_dims=2, max_side=3))
        dt = numpy.dtype(draw(st.sampled_from([numpy.intp, numpy.int8, numpy.uint8])))
        oob = draw(st.integers(0, 8)) == 0  # sometimes out of bounds -> IndexError
        lo = 0 if dt.kind == "u" else -n - oob
        return draw(hnp.arrays(dt, ishape, elements=st.integers(lo, max(n - 1, 0) + oob)))

    if nd == 0 or kind == "bool_full":
        return draw(hnp.arrays(numpy.bool_, shape))
    if kind == "int":
        return ints(shape[0])
    if kind == "int_pair" and nd >= 2:
        sh = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
        return (ints(shape[0], sh.input_shapes[0]), ints(shape[1], sh.input_shapes[1]))
    if kind == "int_slice" and nd >= 2:
        return (slice(None, None, draw(st.sampled_from([1, -1, 2]))), ints(shape[1]))
    if kind == "bool_first":
        return (draw(hnp.arrays(numpy.bool_, (shape[0],))), Ellipsis)
    if kind == "bool_bad":
        return draw(hnp.arrays(numpy.bool_, (shape[0] + 1,)))
    return [draw(st.integers(-shape[0], shape[0] - 1)) for _ in range(draw(st.integers(0, 3)))] \
        if shape[0] else [0]


def lazify_index(idx, how):
    if how == "numpy":
        return idx
    if isinstance(idx, numpy.ndarray):
        return L(idx)
    if isinstance(idx, tuple):
        return tuple(L(i) if isinstance(i, numpy.ndarray) else i for i in idx)
    return idx


@settings(SETTINGS, max_examples=80)
@given(data=st.data())
def test_advanced_getitem(data):
    a = data.draw(array_st(shape_st=shapes(max_dims=3, max_side=4)), label="a")
    idx = data.draw(advanced_index(a.shape), label="index")
    how = data.draw(st.sampled_from(["numpy", "lazy"]), label="index form")
    view_case(a, lambda mod, x: x[idx if mod is numpy else lazify_index(idx, how)],
              raise_at_call=True if how == "numpy" else not_index_error)


@settings(SETTINGS, max_examples=80)
@given(data=st.data())
def test_advanced_setitem(data):
    a = data.draw(array_st(shape_st=shapes(max_dims=3, max_side=4)), label="a")
    idx = data.draw(advanced_index(a.shape), label="index")
    how = data.draw(st.sampled_from(["numpy", "lazy"]), label="index form")
    with quiet():
        try:
            tshape = a[idx].shape
        except IndexError:
            tshape = ()
    vshape = data.draw(st.sampled_from([(), tshape, tshape[1:], (1,) + tshape, (5,)]),
                       label="value shape")
    vdt = data.draw(st.sampled_from([a.dtype, numpy.dtype(numpy.int64),
                                     numpy.dtype(numpy.float64)]))
    val = pattern(vshape, vdt, seed=2)
    val_form = data.draw(st.sampled_from(["numpy", "lazy", "scalar"]), label="value form")
    if val_form == "scalar":
        val = val.ravel()[0].item() if val.size else 1

    def side(mod, x):
        v = x[...]
        i = idx if mod is numpy else lazify_index(idx, how)
        x[i] = L(val) if (mod is lazynp and val_form == "lazy") else val
        return [x, v]

    check(lambda: side(numpy, a.copy()), lambda: side(lazynp, L(a.copy())), kind="exact",
          raise_at_call=True if how == "numpy" else not_index_error)


@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_ufunc_at(data):
    a = data.draw(arrays(numpy.float64, shapes(min_dims=1, max_dims=2), kind="small"))
    n = a.shape[0]
    idx = data.draw(hnp.arrays(numpy.intp, (data.draw(st.integers(0, 6)),),
                               elements=st.integers(-n, max(n - 1, 0)))) if n else \
        numpy.zeros(0, numpy.intp)
    name = data.draw(st.sampled_from(["add", "multiply", "maximum"]))

    def side(mod, x):
        getattr(mod, name).at(x, idx, 2.0)
        return x

    check(lambda: side(numpy, a.copy()), lambda: side(lazynp, L(a.copy())), kind="exact",
          raise_at_call=True)


# --- linalg -----------------------------------------------------------------------------------

@st.composite
def square_matrices(draw, spd=False, dtypes_=(numpy.float64, numpy.float32, numpy.complex128,
                                             numpy.int64)):
    n = draw(st.integers(1, 4))
    batch = draw(st.sampled_from([(), (2,), (1, 2)]))
    dt = numpy.dtype(draw(st.sampled_from(dtypes_)))
    m = draw(arrays(dt, batch + (n, n), kind="small"))
    if spd:
        mh = numpy.swapaxes(m.conj(), -1, -2)
        m = (m @ mh + 4 * n * numpy.eye(n, dtype=dt)).astype(dt)
    else:  # strictly diagonally dominant: well conditioned
        m = (m + (5 * n) * numpy.eye(n, dtype=dt)).astype(dt)
    return m


@pytest.mark.parametrize("name", ["inv", "det", "slogdet", "cholesky"])
@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_linalg_square(name, data):
    m = data.draw(square_matrices(spd=name == "cholesky"), label="m")
    if data.draw(st.integers(0, 8)) == 0:
        m = m[..., :-1] if m.shape[-1] > 1 else m[..., 0, :]  # not square / not 2-d
    check(lambda: getattr(numpy.linalg, name)(m), lambda: getattr(lazynp.linalg, name)(L(m)),
          kind="reduction", rtol=1e-4 if m.dtype == numpy.float32 else 1e-9,
          raise_at_call=True)


def test_linalg_singular_matrix_raises_linalgerror():
    m = numpy.ones((3, 3))
    check(lambda: numpy.linalg.inv(m), lambda: lazynp.linalg.inv(L(m)))
    check(lambda: numpy.linalg.solve(m, numpy.ones(3)),
          lambda: lazynp.linalg.solve(L(m), L(numpy.ones(3))))
    check(lambda: numpy.linalg.cholesky(-numpy.eye(2)),
          lambda: lazynp.linalg.cholesky(L(-numpy.eye(2))))
    assert lazynp.linalg.LinAlgError is numpy.linalg.LinAlgError


@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_linalg_solve(data):
    m = data.draw(square_matrices(), label="a")
    n = m.shape[-1]
    b_shape = data.draw(st.sampled_from([(n,), (n, 2), m.shape[:-2] + (n, 1), (n + 1,),
                                         (2, n, 3)]), label="b shape")
    b = data.draw(arrays(data.draw(st.sampled_from([numpy.float64, numpy.int32, numpy.float32])),
                         b_shape, kind="small"), label="b")
    check(lambda: numpy.linalg.solve(m, b), lambda: lazynp.linalg.solve(L(m), L(b)),
          kind="reduction", rtol=1e-4 if numpy.float32 in (m.dtype, b.dtype) else 1e-9,
          raise_at_call=True)


@settings(SETTINGS, max_examples=30)
@given(m=square_matrices(spd=True, dtypes_=(numpy.float64, numpy.complex128)),
       uplo=st.sampled_from(["L", "U"]))
def test_linalg_eigh(m, uplo):
    def compare(e, a):
        (we, ve), (wa, va) = e, a
        assert (wa.shape, wa.dtype, va.shape, va.dtype) == (we.shape, we.dtype, ve.shape,
                                                            ve.dtype)
        numpy.testing.assert_allclose(wa, we, rtol=1e-9, atol=1e-9)
        # eigenvectors are defined up to phase: check A v = v w and orthonormality
        numpy.testing.assert_allclose(m @ va, va * wa[..., None, :], rtol=1e-8, atol=1e-8)
        eye = numpy.broadcast_to(numpy.eye(m.shape[-1]), va.shape)
        numpy.testing.assert_allclose(numpy.swapaxes(va.conj(), -1, -2) @ va, eye, atol=1e-9)

    check(lambda: tuple(numpy.linalg.eigh(m, uplo)),
          lambda: tuple(lazynp.linalg.eigh(L(m), uplo)), compare=compare)
    check(lambda: numpy.linalg.eigvalsh(m, uplo), lambda: lazynp.linalg.eigvalsh(L(m), uplo),
          kind="reduction")


@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_linalg_norm(data):
    x = data.draw(arrays(data.draw(st.sampled_from([numpy.float64, numpy.float32, numpy.int64,
                                                    numpy.complex128, numpy.bool_])),
                         shapes(max_dims=3, max_side=3), kind="small"), label="x")
    ords = [None, 1, 2, -1, numpy.inf, -numpy.inf, 0, 3, "fro", "nuc"]
    ord_ = data.draw(st.sampled_from(ords), label="ord")
    axis = data.draw(st.none() | st.integers(-x.ndim - 1, x.ndim) |
                     (hnp.valid_tuple_axes(x.ndim, min_size=2, max_size=2) if x.ndim >= 2
                      else st.none()), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    check(lambda: numpy.linalg.norm(x, ord_, axis, keepdims),
          lambda: lazynp.linalg.norm(L(x), ord_, axis, keepdims), kind="reduction",
          rtol=1e-4 if x.dtype == numpy.float32 else 1e-9, raise_at_call=True)


@pytest.mark.parametrize("fill,dtype", [(-1.0, "uint8"), (-1, "uint8"), (1.5, "int8"),
                                        (True, "uint8"), (300.0, "int16"), ("x", "int64")])
def test_full_converts_its_fill_value_like_numpy(fill, dtype):
    """np.full casts the fill value unsafely (-1.0 into uint8 is 255) but a Python int that
    does not fit is an OverflowError (found by a 200-example hypothesis run)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = numpy.full((2,), fill, dtype=dtype)
        except Exception as exc:
            with pytest.raises(type(exc)):
                lazynp.full((2,), fill, dtype=dtype)
            return
        got = numpy.asarray(lazynp.full((2,), fill, dtype=dtype))
        numpy.testing.assert_array_equal(got, want, strict=True)
        got = numpy.asarray(lazynp.full_like(lazynp.zeros(2, dtype), fill))
        numpy.testing.assert_array_equal(got, numpy.full_like(numpy.zeros(2, dtype), fill),
                                         strict=True)


def test_concatenate_axis_none_keeps_python_scalars_weak():
    """NumPy 2 keeps a bare Python scalar weakly typed in concatenate(..., axis=None): with a
    float32 array the result is float32; a list is an int64 array (found by a 200-example
    hypothesis run)."""
    f32 = numpy.array([0.5], numpy.float32)
    for parts in ((numpy.array(False), 0, f32), (f32, 3, 2.5), (f32, [0]),
                  (numpy.array([1], numpy.int8), 7), (numpy.array([1], numpy.int8), 300)):
        want = numpy.concatenate(parts, axis=None)
        got = numpy.asarray(lazynp.concatenate(
            [lazynp.asarray(p) if isinstance(p, numpy.ndarray) else p for p in parts],
            axis=None))
        numpy.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize("index", [numpy.array(0), numpy.array([False]), [0], 0,
                                   (slice(None), 0)])
@pytest.mark.parametrize("value", [-1, [1, 2, 3, 4, 5], "x"])
def test_setitem_errors_come_in_numpys_order(index, value):
    """Index errors, value broadcast and value conversion are checked in NumPy's order
    (an empty uint8 array: an out-of-bounds index before a -1 that does not fit; found by a
    hypothesis run with more examples)."""
    def run(m):
        a = m.zeros((0,), "uint8") if not isinstance(index, tuple) else m.zeros((0, 2), "uint8")
        a[index] = value
        return a
    try:
        want = run(numpy)
    except Exception as exc:
        with pytest.raises(type(exc)):
            run(lazynp)
    else:
        numpy.testing.assert_array_equal(numpy.asarray(run(lazynp)), want, strict=True)


@pytest.mark.parametrize("subs,shape", [("ii->i", (2, 1)), ("ii", (1, 3)), ("iij->j", (2, 1, 3)),
                                        ("ii->i", (3, 3))])
def test_einsum_repeated_label_in_one_operand_does_not_broadcast(subs, shape):
    """A label repeated in one operand (a diagonal) needs equal sizes: NumPy's ValueError at
    the call, not when forced (found by a hypothesis run with more examples)."""
    x = numpy.arange(numpy.prod(shape), dtype=float).reshape(shape)
    try:
        want = numpy.einsum(subs, x)
    except ValueError:
        with pytest.raises(ValueError):
            lazynp.einsum(subs, lazynp.asarray(x))
    else:
        numpy.testing.assert_array_equal(numpy.asarray(lazynp.einsum(subs, lazynp.asarray(x))),
                                         want)


@pytest.mark.parametrize("order", list("CFAKcfak"))
@pytest.mark.parametrize("lazy", [False, True], ids=["computed", "pending"])
def test_flatten_order(order, lazy):
    """``flatten(order)`` reads the elements in that order (it ignored the order: NumPy's
    test_umath flattens divmod's pair with 'f')."""
    base = numpy.arange(24).reshape(2, 3, 4)
    for view in (lambda x: x, lambda x: x.transpose(2, 0, 1), lambda x: x[:, ::2, 1:]):
        with lazynp.policy("lazy") if lazy else lazynp.policy("auto"):
            got = view(L(base) + 0).flatten(order)
        want = view(base).flatten(order)
        numpy.testing.assert_array_equal(numpy.asarray(got), want)


FLAT_INDICES = [None, (1, 2), (), Ellipsis, True, False, "a", 1.0, [True] * 9, [1, 2],
                numpy.array(3), (slice(None),), (1,), numpy.arange(9) % 2 == 0,
                numpy.array([True, False, True]), slice(1, 7, 2), -1, numpy.arange(4)]


def _flat_outcome(mod, idx, value=None):
    import warnings
    a = mod.arange(9).reshape(3, 3).T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            if value is None:
                return "ok", numpy.asarray(a.flat[idx]).tolist()
            a.flat[idx] = value
            return "ok", numpy.asarray(a).tolist()
        except Exception as e:      # noqa: BLE001 (NumPy's class and message are compared)
            return "raises", type(e), str(e)


@pytest.mark.parametrize("idx", FLAT_INDICES, ids=repr)
@pytest.mark.parametrize("value", [None, 70], ids=["read", "write"])
def test_flat_indexing_follows_numpy_flatiter(idx, value):
    """``a.flat[idx]`` by NumPy's flat-iterator rules (``a.flat[True]`` is the first
    element, ``a.flat[()] = v`` is an IndexError; it read them as array indices)."""
    lazy_idx = lazynp.asarray(idx) if isinstance(idx, numpy.ndarray) else idx
    assert _flat_outcome(lazynp, lazy_idx, value) == _flat_outcome(numpy, idx, value)


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "full"])
def test_creation_signatures_are_numpys(name):
    """The same parameters, kinds and defaults as NumPy's (``dtype=None``: NumPy's
    test_numeric TestCreationFuncs.test_signatures)."""
    import inspect

    def params(fn):
        return sorted((p.name, p.kind, p.default) for p in
                      inspect.signature(fn).parameters.values())
    assert params(getattr(lazynp, name)) == params(getattr(numpy, name))


def test_reshape_needs_a_shape_like_numpy():
    import inspect
    a = lazynp.arange(4)
    with pytest.raises(TypeError) as expected:
        numpy.reshape(numpy.arange(4))
    with pytest.raises(TypeError) as got:
        lazynp.reshape(a)
    assert str(got.value) == str(expected.value)
    if "newshape" not in inspect.signature(numpy.reshape).parameters:
        with pytest.raises(TypeError, match="newshape"):
            lazynp.reshape(a, newshape=(4,))

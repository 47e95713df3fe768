"""``x (op) y`` for + - * / on small float arrays computed at once: the C fast path runs NumPy's
own loop for the dtype without the ufunc machinery.  Each result must equal NumPy's bit for
bit, with NumPy's dtype, memory layout, warnings and errors, for every operand form the fast
path takes and every one it leaves to NumPy."""
from __future__ import annotations

import operator
import warnings

import numpy
import pytest

import lazynp

OPS = [operator.add, operator.sub, operator.mul, operator.truediv]


def _matrix(rng, dtype, shape=(9, 13)):
    v = rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, shape)
    v.flat[::7] = 0.0
    return v.astype(dtype)


#: Operands taken the same way from a NumPy matrix and from its lazynp copy.
FORMS = [
    lambda M: M,                        # the whole (C-contiguous) matrix
    lambda M: M[1:-1, 2:],              # a stencil view: row-major, padded rows
    lambda M: M[::2, ::3],              # strided both ways
    lambda M: M[3],                     # a row
    lambda M: M[:, 4],                  # a column (1-D, strided)
    lambda M: M[2:3, :],                # one row kept 2-D
    lambda M: M[:, 1:2],                # one column kept 2-D
    lambda M: M[::-1, :],               # negative strides (NumPy's call)
    lambda M: M.T,                      # column-major (NumPy's call: its layout)
    lambda M: M[None, 0, :],            # 3-D... 2-D from an index with a new axis
    lambda M: M[:, :, None][:, :, 0],
]


def _outcome(op, a, b):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = op(a, b)
        except Exception as e:          # noqa: BLE001 - the class is compared
            return ("raised", type(e)), [str(w.message) for w in caught]
    return r, [str(w.message) for w in caught]


def _same(expected, got):
    if isinstance(expected, tuple):
        assert got == expected
        return
    if isinstance(expected, numpy.ndarray):
        assert type(got) is lazynp.ndarray
        got = numpy.asarray(got)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        same_layout = got.flags.c_contiguous == expected.flags.c_contiguous and \
            got.flags.f_contiguous == expected.flags.f_contiguous
        if lazynp._base.native.ext is None and not expected.flags.c_contiguous:
            # (the pure Python recorder's arithmetic run at once may be C-ordered: README)
            assert same_layout or got.flags.c_contiguous
        else:
            assert got.flags.c_contiguous == expected.flags.c_contiguous
            assert got.flags.f_contiguous == expected.flags.f_contiguous
    else:
        assert type(got) is type(expected)
    assert numpy.array(got).tobytes() == numpy.array(expected).tobytes()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
def test_array_with_array_equals_numpy(dtype, op):
    rng = numpy.random.default_rng(11)
    M, N = _matrix(rng, dtype), _matrix(rng, dtype)
    _check_forms(op, M, N, FORMS)


def _check_forms(op, M, N, forms):
    """``op`` of each form of ``M`` with the same form of ``N``, against NumPy."""
    LM, LN = lazynp.array(M), lazynp.array(N)
    for form in forms:
        expected, expected_warnings = _outcome(op, form(M), form(N))
        got, got_warnings = _outcome(op, form(LM), form(LN))
        _same(expected, got)
        assert got_warnings == expected_warnings


SCALARS = [2.5, -0.0, 1e-300, 3, numpy.float64(0.1), numpy.float32(0.1), True,
           numpy.int64(4), 1e300, float("inf"), float("nan"), 0.0, 1 + 2j, 0, -7,
           2 ** 24, 2 ** 24 + 1, 2 ** 53, 2 ** 53 + 1, -(2 ** 53) - 1, 2 ** 70, 0.5, 0.1,
           3.4e38, 1e39]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
def test_array_with_scalar_equals_numpy(dtype, op):
    rng = numpy.random.default_rng(12)
    M = _matrix(rng, dtype)
    LM = lazynp.array(M)
    _check_with_scalars(op, M, LM, FORMS[:7], SCALARS)


def _check_with_scalars(op, M, LM, forms, scalars):
    """``op`` of each form of ``M`` with each scalar, on both sides, against NumPy."""
    for form in forms:
        for s in scalars:
            for args, largs in (((form(M), s), (form(LM), s)), ((s, form(M)), (s, form(LM)))):
                expected, expected_warnings = _outcome(op, *args)
                got, got_warnings = _outcome(op, *largs)
                _same(expected, got)
                assert got_warnings == expected_warnings, (op, s)


FLAGGED_OPERANDS = {
    "same shape": (numpy.array([1e308, 1.0, 0.0, 1e-308, numpy.inf, -1.0]),
                   numpy.array([10.0, 0.0, 0.0, 1e-10, numpy.inf, 3.0])),
    "broadcast": (numpy.array([[1e308], [1.0], [0.0]]),
                  numpy.array([[10.0, 0.0, -numpy.inf]])),
}


@pytest.mark.parametrize("settings", [{}, {"all": "raise"}, {"all": "ignore"},
                                      {"under": "warn"}, {"over": "raise", "divide": "warn"}])
@pytest.mark.parametrize("operands", list(FLAGGED_OPERANDS))
def test_flagged_results_warn_and_raise_as_numpy(settings, operands):
    a, b = FLAGGED_OPERANDS[operands]
    for op in OPS:
        with numpy.errstate(**settings):
            expected, expected_warnings = _outcome(op, a, b)
            got, got_warnings = _outcome(op, lazynp.array(a), lazynp.array(b))
        _same(expected, got)
        assert got_warnings == expected_warnings


def test_mixed_and_other_dtypes_equal_numpy():
    rng = numpy.random.default_rng(13)
    cases = [(_matrix(rng, "float64"), _matrix(rng, "float32")),
             (numpy.arange(12).reshape(3, 4), numpy.arange(12.0).reshape(3, 4)),
             (numpy.arange(12).reshape(3, 4), numpy.arange(1, 13).reshape(3, 4)),
             (_matrix(rng, "float64"), _matrix(rng, "float64")[0]),
             (_matrix(rng, "float64", (4, 1)), _matrix(rng, "float64", (1, 5))),
             (_matrix(rng, "complex128"), _matrix(rng, "complex128")),
             (_matrix(rng, "float16"), _matrix(rng, "float16")),
             (_matrix(rng, "float64").astype(">f8"), _matrix(rng, "float64")),
             (numpy.zeros((0, 3)), numpy.zeros((0, 3))),
             (_matrix(rng, "float64", (2, 3, 4)), _matrix(rng, "float64", (2, 3, 4)))]
    for a, b in cases:
        for op in OPS:
            expected, expected_warnings = _outcome(op, a, b)
            got, got_warnings = _outcome(op, lazynp.array(a), lazynp.array(b))
            _same(expected, got)
            assert got_warnings == expected_warnings


COMPARISONS = [operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("op", COMPARISONS, ids=lambda f: f.__name__)
def test_comparisons_equal_numpy(dtype, op):
    rng = numpy.random.default_rng(14)
    M = _matrix(rng, dtype)
    M.flat[::5] = numpy.nan
    N = M.copy()
    N.flat[::3] = rng.standard_normal(N.size)[::3]
    LM, LN = lazynp.array(M), lazynp.array(N)
    for form in FORMS:
        for args, largs in (((form(M), form(N)), (form(LM), form(LN))),
                            ((form(M), 0.5), (form(LM), 0.5)),
                            ((numpy.float32(0.5), form(M)), (numpy.float32(0.5), form(LM)))):
            expected, expected_warnings = _outcome(op, *args)
            got, got_warnings = _outcome(op, *largs)
            _same(expected, got)
            assert got_warnings == expected_warnings


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["maximum", "minimum", "add", "multiply", "true_divide",
                                  "less", "sqrt", "negative", "absolute", "exp"])
def test_ufunc_calls_equal_numpy(dtype, name):
    rng = numpy.random.default_rng(15)
    M = _matrix(rng, dtype)
    M.flat[::11] = numpy.nan
    N = _matrix(rng, dtype)
    LM, LN = lazynp.array(M), lazynp.array(N)
    np_uf, lz_uf = getattr(numpy, name), getattr(lazynp, name)
    for form in FORMS:
        if np_uf.nin == 1:
            cases = [((form(M),), (form(LM),)), ((abs(form(M)),), (abs(form(LM)),))]
        else:
            cases = [((form(M), form(N)), (form(LM), form(LN))),
                     ((form(M), 1.5), (form(LM), 1.5))]
        for args, largs in cases:
            expected, expected_warnings = _outcome(lambda *a: np_uf(*a), *args) \
                if len(args) == 2 else _outcome(lambda a, _: np_uf(a), args[0], None)
            got, got_warnings = _outcome(lambda *a: lz_uf(*a), *largs) \
                if len(largs) == 2 else _outcome(lambda a, _: lz_uf(a), largs[0], None)
            _same(expected, got)
            assert got_warnings == expected_warnings


def test_unary_operators_equal_numpy():
    rng = numpy.random.default_rng(16)
    for dtype in ("float64", "float32"):
        M = _matrix(rng, dtype)
        M.flat[::4] = -0.0
        M.flat[::9] = numpy.nan
        LM = lazynp.array(M)
        for form in FORMS:
            for op in (operator.neg, operator.pos, abs):
                expected, expected_warnings = _outcome(lambda a, _: op(a), form(M), None)
                got, got_warnings = _outcome(lambda a, _: op(a), form(LM), None)
                _same(expected, got)
                assert got_warnings == expected_warnings


INT_SCALARS = [0, 3, -2, 127, 128, -129, 255, 256, 2 ** 31, -(2 ** 31) - 1, 2 ** 63, -(2 ** 63),
               numpy.int8(5), numpy.uint8(200), numpy.int32(-7), numpy.int64(9),
               numpy.uint64(2 ** 63), True, 2.5]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "uint32",
                                   "uint64"])
@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.lt, operator.eq, operator.ge],
                         ids=lambda f: f.__name__)
def test_integer_operands_equal_numpy(dtype, op):
    rng = numpy.random.default_rng(17)
    info = numpy.iinfo(dtype)
    M = rng.integers(info.min, info.max, (9, 13), dtype=dtype, endpoint=True)
    N = rng.integers(info.min, info.max, (9, 13), dtype=dtype, endpoint=True)
    _check_forms(op, M, N, FORMS)
    _check_with_scalars(op, M, lazynp.array(M), FORMS[:5], INT_SCALARS)


@pytest.mark.parametrize("name", ["maximum", "minimum", "add", "less_equal"])
def test_integer_ufunc_calls_equal_numpy(name):
    rng = numpy.random.default_rng(18)
    for dtype in ("int8", "int32", "int64", "uint16"):
        M = rng.integers(0, 100, (9, 13)).astype(dtype)
        N = rng.integers(0, 100, (9, 13)).astype(dtype)
        np_uf, lz_uf = getattr(numpy, name), getattr(lazynp, name)
        for form in FORMS:
            for args, largs in (((form(M), form(N)), (form(lazynp.array(M)), form(lazynp.array(N)))),
                                ((form(M), 7), (form(lazynp.array(M)), 7))):
                _same(_outcome(np_uf, *args)[0], _outcome(lz_uf, *largs)[0])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32",
                                   "int64", "uint64", "float64", "bool"])
def test_max_and_min_methods_equal_numpy(dtype):
    rng = numpy.random.default_rng(19)
    if dtype == "bool":
        M = rng.random((9, 13)) < 0.5
    elif dtype == "float64":
        M = _matrix(rng, dtype)
    else:
        info = numpy.iinfo(dtype)
        M = rng.integers(info.min, info.max, (9, 13), dtype=dtype, endpoint=True)
    L = lazynp.array(M)
    forms = FORMS + [lambda A: A[2:2], lambda A: A[0, 0], lambda A: A.reshape(3, 3, 13)]
    for form in forms:
        for name in ("max", "min"):
            expected = _outcome(lambda a, _: getattr(a, name)(), form(M), None)[0]
            got = _outcome(lambda a, _: getattr(a, name)(), form(L), None)[0]
            if isinstance(expected, numpy.ndarray):
                got = numpy.asarray(got)
                assert got.dtype == expected.dtype and numpy.array_equal(got, expected)
            else:
                _same(expected, got)


#: Pairs of operand shapes that broadcast (and two that do not: NumPy's ValueError).
BROADCAST_SHAPES = [((600, 1, 2), (1, 4, 2)), ((5, 1), (1, 7)), ((3, 1, 4), (4,)),
                    ((1, 5), (5, 1)), ((2, 3, 1, 5), (3, 4, 1)), ((7,), (3, 7)),
                    ((40, 3), (3,)), ((3, 1), (3, 4)), ((2, 3, 4), (2, 3, 4)),
                    ((1,), (6,)), ((2, 1, 1, 1, 1, 1, 1, 3), (4, 1, 1, 1, 1, 1, 1)),
                    ((3, 4), (5, 4)), ((2, 3), (3, 2))]


def _broadcast_operand(rng, dtype, shape, form):
    """A NumPy operand of ``shape`` and the same view of a lazynp copy of its block: the
    block itself (C-ordered), a gapped view, a reversed or a transposed view (the last two
    take NumPy's call: their layout)."""
    block_shape = {"gapped": tuple(2 * d for d in shape),
                   "transposed": tuple(reversed(shape))}.get(form, shape)
    if numpy.dtype(dtype).kind == "f":
        block = _matrix(rng, dtype, block_shape)
    else:
        block = rng.integers(-50, 50, block_shape).astype(dtype)
    view = {"c": lambda b: b, "gapped": lambda b: b[tuple(slice(None, None, 2) for _ in shape)],
            "reversed": lambda b: b[::-1], "transposed": lambda b: b.T}[form]
    return view(block), view(lazynp.array(block))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8"])
@pytest.mark.parametrize("form", ["c", "gapped", "reversed", "transposed"])
def test_broadcast_operands_equal_numpy(dtype, form):
    rng = numpy.random.default_rng(19)
    ops = OPS + COMPARISONS + [numpy.maximum, numpy.minimum]
    for sx, sy in BROADCAST_SHAPES:
        x, lx = _broadcast_operand(rng, dtype, sx, form)
        y, ly = _broadcast_operand(rng, dtype, sy, "c")
        for (a, la), (b, lb) in (((x, lx), (y, ly)), ((y, ly), (x, lx))):
            for op in ops:
                lz_op = getattr(lazynp, op.__name__) if isinstance(op, numpy.ufunc) else op
                expected, expected_warnings = _outcome(op, a, b)
                got, got_warnings = _outcome(lz_op, la, lb)
                _same(expected, got)
                assert got_warnings == expected_warnings, (op, a.shape, b.shape)


IOPS = [operator.iadd, operator.isub, operator.imul, operator.itruediv]


def _inplace_outcome(op, target, operand):
    """(True when the operator returned the target itself, or the exception class; the
    warnings)."""
    r, caught = _outcome(op, target, operand)
    return (r if isinstance(r, tuple) else r is target), caught


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8", "int64"])
@pytest.mark.parametrize("op", IOPS, ids=lambda f: f.__name__)
def test_inplace_operators_equal_numpy(dtype, op):
    """``target op= operand`` on small arrays: into every target form (whole, rows of a
    stencil view, strided, a row, a column...), with same-form arrays, broadcast rows and
    scalars, floating-point flags and NumPy's errors (int ``/=``, non-broadcastable output,
    read-only targets)."""
    rng = numpy.random.default_rng(23)
    if numpy.dtype(dtype).kind == "f":
        M, N = _matrix(rng, dtype), _matrix(rng, dtype)
        M.flat[::5] = 0.0
    else:
        M = rng.integers(0, 100, (9, 13)).astype(dtype)
        N = rng.integers(1, 100, (9, 13)).astype(dtype)
    operands = [lambda f, n: f(n), lambda f, n: n[0, :f(n).shape[-1]] if f(n).ndim == 2
                else n[0, :f(n).shape[0]], lambda f, n: 2.5, lambda f, n: 3,
                lambda f, n: numpy.float32(0.5), lambda f, n: 1e300, lambda f, n: 0.0,
                lambda f, n: numpy.ones((2,) + f(n).shape, n.dtype)]
    for form in FORMS[:9]:
        for operand in operands:
            tn = M.copy()
            tl = lazynp.array(M)
            expected = _inplace_outcome(op, form(tn), operand(form, N))
            lz_operand = operand(form, N)
            if isinstance(lz_operand, numpy.ndarray):
                lz_operand = lazynp.array(lz_operand)
            got = _inplace_outcome(op, form(tl), lz_operand)
            assert got == expected, (form, operand(form, N))
            assert numpy.asarray(tl).tobytes() == tn.tobytes()
    ro = numpy.broadcast_to(M[0], (3, 13))
    assert _inplace_outcome(op, lazynp.broadcast_to(lazynp.array(M[0]), (3, 13)), 1)[0] == \
        _inplace_outcome(op, ro, 1)[0]

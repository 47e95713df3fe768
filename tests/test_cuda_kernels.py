"""Fused CUDA kernels (Numba's simulator in CI): every kernel shape equals NumPy."""
from __future__ import annotations

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy as np
import pytest

import lazynp as lnp
from lazynp import devices


def dev(x):
    return lnp.asarray(x, device="cuda")


def stats():
    from lazynp.cuda import codegen, runtime
    return {**runtime.STATS, **codegen.STATS}


RNG = np.random.default_rng(0)
DTYPES = ["bool", "int32", "int64", "float32", "float64", "complex128"]


def _values(shape, dt):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return RNG.random(shape) > 0.5
    if dt.kind in "iu":
        return RNG.integers(-5, 6, shape).astype(dt)
    if dt.kind == "c":
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dt)
    return RNG.standard_normal(shape).astype(dt)


def _same(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    assert got.dtype == np.asarray(want).dtype
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-5 if got.dtype.itemsize <= 8 and
                                   got.dtype.kind == "f" and got.dtype == np.float32
                                   else 1e-12, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", DTYPES)
def test_fused_elementwise_each_dtype(dt):
    a, b = _values((3, 4), dt), _values((3, 4), dt)
    da, db = dev(a), dev(b)
    before = stats()["device_kernels"]
    got = (da * db + da) - db * 2 if dt != "bool" else (da & db) | ~da
    want = (a * b + a) - b * 2 if dt != "bool" else (a & b) | ~a
    _same(got, want)
    assert stats()["device_kernels"] - before == 1       # one fused kernel


def test_unary_math_and_mixed_dtypes():
    a = _values((5,), "float32")
    i = _values((5,), "int64")
    da, di = dev(a), dev(i)
    _same(lnp.exp(da) * 0.5 + lnp.tanh(da), np.exp(a) * 0.5 + np.tanh(a))
    _same(da + di, a + i)                    # float32 + int64 -> float64
    _same(di * 3 + 1, i * 3 + 1)
    _same(lnp.maximum(da, 0) > 0.1, np.maximum(a, 0) > 0.1)
    _same(da.astype(np.float64) / 3, a.astype(np.float64) / 3)
    _same(lnp.sqrt(lnp.abs(da)), np.sqrt(np.abs(a)))
    _same(lnp.where(da > 0, da, 0.0), np.where(a > 0, a, 0.0))
    _same(lnp.where(da > 0, di, da * 2), np.where(a > 0, i, a * 2))


def test_broadcasting_and_scalars():
    a, b = _values((3, 1), "float64"), _values((4,), "float64")
    da, db = dev(a), dev(b)
    _same(da * db - 1.5, a * b - 1.5)
    _same(np.float32(2) * db, np.float32(2) * b)
    z = dev(np.float64(3.0))
    assert z.shape == ()
    _same(z * da, 3.0 * a)
    _same((z + 1) * 2, (np.float64(3.0) + 1) * 2)


def test_strided_views():
    a = _values((4, 6), "float64")
    da = dev(a)
    _same(da[::2, 1:] * 2 + 1, a[::2, 1:] * 2 + 1)
    _same(da.T - da.T * da.T, a.T - a.T * a.T)
    _same(da[:, ::-2] + da[:, 1::2], a[:, ::-2] + a[:, 1::2])
    _same(da[1] + 1, a[1] + 1)
    _same(da.reshape(3, 8) * 2, a.reshape(3, 8) * 2)
    _same(da.T.reshape(-1) + 0, a.T.reshape(-1) + 0)       # a copy, as in NumPy


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "min", "any", "all"])
def test_reductions_each_axis_keepdims(name):
    a = _values((3, 4, 5), "float64")
    if name == "prod":
        a = 1 + a / 10
    if name in ("any", "all"):
        a = (a > -1.0).astype(np.float64)
    da = dev(a)
    for axis, keepdims in ((None, False), (0, True), (1, False), (2, True), ((0, 2), False)):
        if True:
            got = getattr(lnp, name)(da * 2 - 1, axis=axis, keepdims=keepdims)
            want = getattr(np, name)(a * 2 - 1, axis=axis, keepdims=keepdims)
            assert isinstance(got, type(da))
            _same(got, want)


@pytest.mark.parametrize("dt", ["bool", "int32", "float32", "complex128"])
def test_reduction_dtypes(dt):
    a = _values((4, 9), dt)
    da = dev(a)
    _same(da.sum(), a.sum())
    _same(da.sum(axis=1), a.sum(axis=1))
    if dt != "complex128":
        _same(da.max(axis=0), a.max(axis=0))
    _same(da.any(axis=1), a.any(axis=1))


def test_reduction_of_view_and_nan():
    a = _values((6, 5), "float64")
    a[2, 3] = np.nan
    da = dev(a)
    _same(da.T.max(axis=1), a.T.max(axis=1))
    _same(da[::2].sum(axis=0), a[::2].sum(axis=0))
    _same(lnp.min(da, axis=0), np.min(a, axis=0))


@pytest.mark.parametrize("dt", ["int32", "float32", "float64", "complex128"])
def test_reductions_keeping_the_last_axis_are_one_thread_per_column(dt):
    """``x.sum(axis=0)`` and other reductions that keep the last axis: the coalesced
    kernel (consecutive threads on consecutive columns), with its partial slices."""
    from lazynp.cuda import runtime
    a, b = _values((7, 3, 5), dt), _values((5,), dt)
    da, db = dev(a), dev(b)
    kinds = ["sum", "mean", "prod"] + ([] if dt == "complex128" else ["max", "min"])
    for axis in (0, 1, (0, 1), -2):
        for name in kinds:
            _same(getattr(lnp, name)(da * 2 + db, axis=axis),
                  getattr(np, name)(a * 2 + b, axis=axis))
    t = da - db                           # (a member's value stored by the same kernel)
    s = t.sum(axis=0, keepdims=True)
    _same(s, (a - b).sum(axis=0, keepdims=True))
    _same(t, a - b)
    _same(da[::2, :, 1:].max(axis=0) if dt != "complex128" else da[::2, :, 1:].sum(axis=0),
          a[::2, :, 1:].max(axis=0) if dt != "complex128" else a[::2, :, 1:].sum(axis=0))
    assert any("j += P\n" in src for src, _ in runtime._sources.values())


def test_softmax_rows():
    a = _values((3, 10), "float32")
    da = dev(a)
    e = lnp.exp(da - da.max(axis=1, keepdims=True))
    got = e / e.sum(axis=1, keepdims=True)
    ea = np.exp(a - a.max(axis=1, keepdims=True))
    _same(got, ea / ea.sum(axis=1, keepdims=True))


def test_reduction_errors_at_the_call():
    da = dev(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="zero-size"):
        da.max(axis=0)
    with pytest.raises(np.exceptions.AxisError):
        dev(np.zeros(3)).sum(axis=2)
    _same(da.sum(axis=0), np.zeros(3))


def test_compiled_kernels_are_cached():
    a = dev(_values((7,), "float64"))
    (a * 3.5 + 1).block_until_ready()
    n = stats()["cuda_kernel_compiles"]
    for k in range(3):
        _same(a * (k + 0.5) + 1, np.asarray(a) * (k + 0.5) + 1)   # new constants, same kernel
    assert stats()["cuda_kernel_compiles"] == n


def test_non_elementwise_counted_fallback():
    a, b = _values((3, 4), "float64"), _values((4, 2), "float64")
    before = stats()["device_host_fallbacks"]
    got = dev(a) @ dev(b)
    assert got.device == "cuda:0"
    _same(got, a @ b)
    _same(lnp.std(dev(a), axis=0), np.std(a, axis=0))
    _same(lnp.argmax(dev(a), axis=1), np.argmax(a, axis=1))
    assert stats()["device_host_fallbacks"] - before >= 3


def test_other_functions_run_at_once_on_the_device_values():
    """sort, linalg, fft, concatenate...: NumPy's function on the device's values (CuPy on a
    GPU; the host under the simulator, counted); array results stay on the device."""
    a = _values((4, 4), "float64") + 4 * np.eye(4)
    da = dev(a)
    before = stats()["device_host_fallbacks"]
    for got, want in [(lnp.sort(da, axis=0), np.sort(a, axis=0)),
                      (lnp.linalg.inv(da), np.linalg.inv(a)),
                      (lnp.concatenate([da, da * 2]), np.concatenate([a, a * 2])),
                      (lnp.fft.fft(da), np.fft.fft(a))]:
        assert got.device == "cuda:0"
        _same(got, want)
    q, r = lnp.linalg.qr(da)
    assert q.device == r.device == "cuda:0"
    np.testing.assert_allclose(np.asarray(q @ r), a, atol=1e-12)
    assert stats()["device_host_fallbacks"] - before >= 5
    with pytest.raises(ValueError, match="two devices"):
        lnp.concatenate([da, a])
    assert devices.placement((1, 2.0, np.float32(1))) == "cpu"


# ---- the device template table (lazynp.cuda.devmath); tests/test_cuda_compile.py compiles
# ---- every kernel these tests generate with numba-cuda's real compiler

UNARY_MATH = ["exp", "sqrt", "absolute", "fabs", "floor", "ceil", "trunc", "expm1", "log1p",
              "isinf", "isfinite", "signbit", "reciprocal", "sin", "cos", "tanh", "arcsinh",
              "deg2rad", "rad2deg", "log", "log10", "arctan"]
BINARY_MATH = ["copysign", "logaddexp", "arctan2", "hypot", "power", "maximum", "fmin"]


def _special(dt):
    """Values with NaN, both infinities and both zeros among ordinary ones."""
    v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -1.5, 2.0, 1e-3, -7.25, 3.0, 100.0])
    return v.astype(dt)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_unary_math_with_special_values_is_one_kernel(dt):
    a = _special(dt)
    da = dev(a)
    for name in UNARY_MATH:
        before = stats()["device_kernels"]
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a)
            got = np.asarray(getattr(lnp, name)(da))
        assert stats()["device_kernels"] - before == 1, name       # fused, not a fallback
        assert got.dtype == want.dtype, name                       # float32 stays float32
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_binary_math_and_powers_with_special_values(dt):
    a = _special(dt)
    b = np.roll(a, 3)
    da, db = dev(a), dev(b)
    with np.errstate(all="ignore"):
        for name in BINARY_MATH:
            _same(getattr(lnp, name)(da, db), getattr(np, name)(a, b))
        for c in (0.5, 2, 3, -1.5):
            got, want = np.asarray(da ** c), a ** c
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
            np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_integer_and_complex_templates():
    i = np.array([-128, -3, 0, 5, 127], dtype=np.int8)
    c = np.array([1 + 2j, -3j, np.inf + 0j, complex(np.nan, 1)])
    _same(lnp.abs(dev(i)), np.abs(i))                  # -128 wraps, as in NumPy
    _same(lnp.abs(dev(c)), np.abs(c))
    _same(lnp.isinf(dev(c)), np.isinf(c))
    _same(lnp.isfinite(dev(c)), np.isfinite(c))
    _same(lnp.conjugate(dev(c)) * 2, np.conjugate(c) * 2)
    _same(lnp.isinf(dev(i)), np.isinf(i))


def _fusible_cases():
    """(op, input dtypes) for which the CPU generator writes an expression."""
    from lazynp.ops.elementwise import UFUNC_OPS
    dts = [np.dtype(d) for d in ("bool", "int8", "int64", "uint32", "float32", "float64",
                                 "complex64", "complex128")]
    ops = {op.name: op for op in UFUNC_OPS.values() if op.ufunc is not None}
    for op in ops.values():
        for d in dts:
            yield op, (d,) * op.ufunc.nin


def test_every_expression_the_generator_writes_has_a_device_template():
    """The CPU and CUDA generators share the op table's templates: each NumPy function a
    generated expression calls is lowered by lazynp.cuda.devmath (no ``KeyError: <ufunc>``
    from numba-cuda at a later read)."""
    from types import SimpleNamespace

    from lazynp.cuda import devmath
    from lazynp.kernels import exprs
    written = 0
    for op, ins in _fusible_cases():
        try:
            loop = op.ufunc.resolve_dtypes(ins + (None,) * op.ufunc.nout)
        except Exception:
            continue
        out, loop_ins = loop[op.ufunc.nin], loop[:op.ufunc.nin]
        node = SimpleNamespace(op=op, dtype=out, params=None, args=())
        for const_exp in (False, True) if op.name == "power" else (False,):
            expr = exprs.node_expr(node, [f"a{k}" for k in range(len(ins))], list(ins),
                                   list(ins), const_exp)
            if expr is None:
                continue
            written += 1
            assert devmath.missing_functions(expr) == [], (op.name, ins, expr)
            for name in devmath.missing_functions.__globals__["_CALL"].findall(expr):
                if name in devmath.DEVICE_TABLE:
                    kinds = devmath.DEVICE_TABLE[name]
                    assert all(d.kind in kinds for d in loop_ins), (op.name, ins, expr)
    assert written > 100


def test_a_function_without_a_device_template_is_named():
    from lazynp.cuda import codegen
    src = codegen._PRELUDE + \
        "\n@cuda.jit\ndef kernel(x0, o0, n):\n    o0[0] = np.frobnicate(x0[0])\n"
    with pytest.raises(codegen.LoweringError, match="np.frobnicate"):
        codegen.compile_source(src)


def test_lazynp_launches_do_not_raise_numba_performance_warnings():
    """A grid under 128 blocks warns ``NumbaPerformanceWarning`` on a real GPU; under
    ``-W error`` it must not become the kernel's error (lazynp's own launches only)."""
    import warnings

    from lazynp.cuda import codegen
    from numba.cuda.core.errors import NumbaPerformanceWarning

    class SmallGridKernel:
        def __getitem__(self, config):
            warnings.warn(NumbaPerformanceWarning("Grid size 1 will likely result in GPU "
                                                  "under-utilization due to low occupancy."))
            return lambda *args: "launched"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = list(warnings.filters)
        assert codegen.QuietLaunch(SmallGridKernel())[1, 32, 0]() == "launched"
        assert warnings.filters == before
        with pytest.raises(NumbaPerformanceWarning):      # the user's own kernels still warn
            SmallGridKernel()[1, 32, 0]
        a = dev(_values((5,), "float32"))
        _same(a * 2 + 1, np.asarray(a) * 2 + 1)
    src = codegen._PRELUDE + "\n@cuda.jit\ndef kernel(x0):\n    pass\n"
    codegen.compile_source(src)
    assert isinstance(codegen._kernels[src], codegen.QuietLaunch)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_degree_constants_are_numpys_bit_for_bit(dt):
    """deg2rad/rad2deg on the device multiply by NumPy's constants rounded in the dtype."""
    from lazynp.cuda import devmath
    d2r, r2d = devmath._degree_constants(dt)
    x = (np.random.default_rng(1).standard_normal(10000) * 1000).astype(dt)
    np.testing.assert_array_equal(x * d2r, np.deg2rad(x))
    np.testing.assert_array_equal(x * r2d, np.rad2deg(x))

"""Kernel fusion against NumPy: generated expression trees, reduction epilogues, views,
memory of fused groups, the kernel cache and the buffer pool.

NumPy is the oracle.  ``lazynp.kernels.cpu.SYNC_COMPILE`` is switched on for every test, so
a group's Numba kernel is compiled on first use and the kernel (not the NumPy fallback that
runs while a background compile is pending) produces the values compared here.  Tests on
small arrays lower ``lazynp.core.state.shared.min_fused_work`` to 0 so that tiny groups run
as kernels.

Tolerances: integer and bool results, and float results built without transcendental
functions (+ - * / // % abs neg maximum minimum where clip astype sqrt -- all correctly
rounded in IEEE arithmetic), must be bit-for-bit equal (signed zeros included).  Where
exp/log/sin/cos/tanh/** appear the float result may differ by about one ulp per
transcendental call: Numba calls the platform libm (glibc), NumPy its own SIMD
implementations, and the two are each within ~1 ulp of the true value.  Such results are
compared with rtol 1e-13 (float64) / 1e-5 (float32) and identical NaN/inf positions; the
generated programs only feed such values into well-conditioned ops (``APPROX_OK``), so the
difference cannot be amplified (by cancellation, a comparison, ``cos`` of a large argument).
Sums and means may differ by the summation order (NumPy: pairwise; kernels: sequential).
"""
from __future__ import annotations

import contextlib
import gc
import math
import operator
import os
import subprocess
import sys
import tracemalloc
import warnings

import numpy
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import lazynp
import lazynp._base.config as lconfig
from lazynp.core.state import shared as graph_state
from lazynp.kernels import cache as kcache, cpu as kcpu
from lazynp.kernels import pool as kpool

# these tests study the graph machinery: every operation is recorded
pytestmark = pytest.mark.usefixtures("lazy_policy")


# --- fixtures and helpers ------------------------------------------------------------------

@pytest.fixture(autouse=True)
def sync_compile(monkeypatch):
    """Compile kernels on first use, so that kernels (not the NumPy fallback) run."""
    monkeypatch.setattr(kcpu, "SYNC_COMPILE", True)
    monkeypatch.setattr(lconfig, "FUSION", True)
    yield


@pytest.fixture
def small_work(monkeypatch):
    """Let groups of any size run as kernels (by default a flush needs an array of >= 8k
    elements for the fusion pass, and a group >= 64k element-ops for a kernel)."""
    monkeypatch.setattr(graph_state, "min_fused_work", 0)
    monkeypatch.setattr(graph_state, "min_kernel_work", 0)
    monkeypatch.setattr(graph_state, "tree_flushes", False)     # (the fusion pass, not trees)


def stat(name: str) -> int:
    return lazynp.stats()[name]


def compile_events() -> int:
    """Kernels built in this process: fresh compiles plus loads from Numba's disk cache."""
    s = lazynp.stats()
    return s["kernel_compiles"] + s["kernel_cache_hits"]


@contextlib.contextmanager
def quiet():
    with numpy.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def assert_exact(actual, expected, where=""):
    """Same shape, dtype, values bit-for-bit (NaN positions and signed zeros)."""
    a = numpy.asarray(actual)
    e = numpy.asarray(expected)
    assert a.shape == e.shape, f"{where}: shape {a.shape} != NumPy's {e.shape}"
    assert a.dtype == e.dtype, f"{where}: dtype {a.dtype} != NumPy's {e.dtype}"
    numpy.testing.assert_array_equal(a, e, err_msg=where, strict=True)
    if e.dtype.kind == "f":
        bad = numpy.signbit(a) != numpy.signbit(e)
        bad &= ~numpy.isnan(e)
        assert not bad.any(), (f"{where}: signed zeros differ at {numpy.argwhere(bad)[:5]}: "
                               f"numpy {e[bad][:5]} lazynp {a[bad][:5]}")


def assert_close(actual, expected, where="", rtol=None):
    """Same shape, dtype, NaN/inf positions; finite values within rtol (see module doc)."""
    a = numpy.asarray(actual)
    e = numpy.asarray(expected)
    assert a.shape == e.shape, f"{where}: shape {a.shape} != NumPy's {e.shape}"
    assert a.dtype == e.dtype, f"{where}: dtype {a.dtype} != NumPy's {e.dtype}"
    if e.dtype.kind not in "fc":
        numpy.testing.assert_array_equal(a, e, err_msg=where, strict=True)
        return
    if rtol is None:
        rtol = 1e-5 if e.dtype == numpy.float32 else 1e-13
    numpy.testing.assert_array_equal(numpy.isnan(a), numpy.isnan(e), err_msg=f"{where}: NaN")
    numpy.testing.assert_array_equal(numpy.isposinf(a), numpy.isposinf(e),
                                     err_msg=f"{where}: +inf")
    numpy.testing.assert_array_equal(numpy.isneginf(a), numpy.isneginf(e),
                                     err_msg=f"{where}: -inf")
    fin = numpy.isfinite(e)
    # absolute slack only for subnormal results (a product of two values that differ by
    # ulps may underflow, losing relative precision)
    numpy.testing.assert_allclose(a[fin], e[fin], rtol=rtol,
                                  atol=4 * float(numpy.finfo(e.dtype).tiny), err_msg=where)


# --- 1. generated expression trees -------------------------------------------------------

M, N = 6, 9
LEAF_SHAPES = [(M, N), (N,), (M, 1), (1, N), ()]
LEAF_DTYPES = [numpy.dtype(d) for d in ("bool", "int8", "int32", "int64", "uint8", "float32",
                                         "float64")]
# Python scalars are weak (NEP 50); NumPy scalars are strong.  300, -129, 1000 do not fit
# small integer dtypes: NumPy raises for arithmetic with them but compares them exactly.
CONSTS = [0, 1, 2, 3, -1, -7, 100, True, False, 0.5, 1.5, -2.25, 0.1, 3.0, 1e-3, 1e10,
          math.nan, math.inf, 300, -129, 1000, numpy.float32(1.5), numpy.int8(3),
          numpy.float64(-0.75), numpy.int64(5), numpy.uint8(200)]
CLIP_BOUNDS = [(-1, 2), (0, 3), (0.5, 3.5), (-2.25, 0.1), (-5, 300), (0, 100)]


def _op(fn, nin, approx=False, const_slots=None):
    """fn(mod, *args); approx: the result may differ from NumPy's by ulps (libm);
    const_slots: argument positions that may be Python / NumPy scalar constants."""
    return {"fn": fn, "nin": nin, "approx": approx,
            "const": tuple(range(nin)) if const_slots is None else const_slots}


def _astype(dt):
    return lambda m, x: x.astype(dt)


OPS = {
    "+": _op(lambda m, x, y: x + y, 2),
    "-": _op(lambda m, x, y: x - y, 2),
    "*": _op(lambda m, x, y: x * y, 2),
    "/": _op(lambda m, x, y: x / y, 2),
    "//": _op(lambda m, x, y: x // y, 2),
    "%": _op(lambda m, x, y: x % y, 2),
    "**": _op(lambda m, x, y: x ** y, 2, approx=True),
    "neg": _op(lambda m, x: -x, 1, const_slots=()),
    "abs": _op(lambda m, x: m.abs(x), 1, const_slots=()),
    "exp": _op(lambda m, x: m.exp(x), 1, approx=True, const_slots=()),
    "log": _op(lambda m, x: m.log(x), 1, approx=True, const_slots=()),
    "sqrt": _op(lambda m, x: m.sqrt(x), 1, const_slots=()),
    "sin": _op(lambda m, x: m.sin(x), 1, approx=True, const_slots=()),
    "cos": _op(lambda m, x: m.cos(x), 1, approx=True, const_slots=()),
    "tanh": _op(lambda m, x: m.tanh(x), 1, approx=True, const_slots=()),
    "maximum": _op(lambda m, x, y: m.maximum(x, y), 2),
    "minimum": _op(lambda m, x, y: m.minimum(x, y), 2),
    "where": _op(lambda m, c, x, y: m.where(c, x, y), 3, const_slots=(1, 2)),
    "<": _op(lambda m, x, y: x < y, 2),
    "<=": _op(lambda m, x, y: x <= y, 2),
    ">": _op(lambda m, x, y: x > y, 2),
    ">=": _op(lambda m, x, y: x >= y, 2),
    "==": _op(lambda m, x, y: x == y, 2),
    "!=": _op(lambda m, x, y: x != y, 2),
    "&": _op(lambda m, x, y: x & y, 2),
    "|": _op(lambda m, x, y: x | y, 2),
    "^": _op(lambda m, x, y: x ^ y, 2),
    "astype(float64)": _op(_astype(numpy.float64), 1, const_slots=()),
    "astype(float32)": _op(_astype(numpy.float32), 1, const_slots=()),
    "astype(int64)": _op(_astype(numpy.int64), 1, const_slots=()),
    "clip": _op(None, 1, const_slots=()),   # bounds drawn separately
}
OP_NAMES = sorted(OPS)
# Ops that may read a value that already differs from NumPy's by ulps (a transcendental
# somewhere below): they are well-conditioned, so the difference stays a few ulps.
# Comparisons, //, %, astype(int) could flip the result; + - (cancellation), exp, **, sin...
# (large arguments) could amplify it beyond any fixed tolerance.
APPROX_OK = {"*", "/", "neg", "abs", "maximum", "minimum", "where", "clip", "sqrt",
             "astype(float64)", "astype(float32)"}


def _leaf_values(rng, dtype, shape):
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = numpy.iinfo(dtype)
        if rng.random() < 0.5:
            lo, hi = max(info.min, -6), min(info.max, 6)
        else:
            lo, hi = info.min, info.max
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=dtype)
    v = rng.standard_normal(shape) * 10.0 ** rng.integers(-2, 3)
    v = numpy.asarray(v)
    if v.size:
        specials = numpy.array([numpy.nan, numpy.inf, -numpy.inf, 0.0, -0.0, 1.0, -1.0])
        k = rng.integers(0, min(4, v.size) + 1)
        idx = rng.choice(v.size, size=k, replace=False)
        v.reshape(-1)[idx] = rng.choice(specials, size=k)
    return v.astype(dtype)


_VIEW_KINDS = ("plain", "transposed", "reversed", "strided")


def _make_base(rng, dtype, shape, kind):
    """(base NumPy array, view function) with view(base) of ``shape``."""
    if kind == "plain" or len(shape) == 0:
        return _leaf_values(rng, dtype, shape), (lambda b: b), ""
    if kind == "transposed" and len(shape) == 2:
        return _leaf_values(rng, dtype, shape[::-1]), (lambda b: b.T), ".T"
    if kind == "reversed":
        return _leaf_values(rng, dtype, shape), (lambda b: b[..., ::-1]), "[..., ::-1]"
    big = shape[:-1] + (2 * shape[-1],)
    return _leaf_values(rng, dtype, big), (lambda b: b[..., ::2]), "[..., ::2]"


def _rtol(dtype) -> float:
    """Tolerance for a value of ``dtype`` that went through a transcendental function."""
    return {2: 2e-3, 4: 1e-5}.get(numpy.dtype(dtype).itemsize, 1e-13) \
        if numpy.dtype(dtype).kind == "f" else 1e-13


def _fmt(x):
    if isinstance(x, numpy.generic):
        return f"numpy.{type(x).__name__}({x!r})"
    return repr(x)


REDUCTIONS = ("sum", "mean", "max", "min", "any", "all")


class Program:
    """Leaf arrays, elementwise steps over earlier values, maybe a trailing reduction."""

    def __init__(self, seed, keep_all):
        self.seed = seed
        self.keep_all = keep_all      # keep every intermediate alive (more stored outputs)
        self.leaves = []              # (base array, view fn, view text)
        self.steps = []               # (op name, [("e", index) | ("c", constant)], clip bounds)
        self.vals = []                # NumPy value of every leaf and step
        self.approx = []              # 0.0, or the rtol of a value that may differ by ulps
        self.exprs = []
        self.red = None               # (kind, axis, keepdims) applied to the last step
        self.red_val = None

    def describe(self) -> str:
        out = [f"(seed {self.seed})"]
        for i, (base, _vf, vtext) in enumerate(self.leaves):
            out.append(f"x{i} = asarray({base.dtype} array of shape {base.shape}){vtext}")
        for k, e in enumerate(self.exprs):
            out.append(f"t{k} = {e}")
        if self.red is not None:
            kind, axis, keepdims = self.red
            out.append(f"r = t{len(self.steps) - 1}.{kind}(axis={axis!r}, keepdims={keepdims})")
        out.append(f"(intermediates {'kept alive' if self.keep_all else 'dropped'})")
        return "\n    ".join(out)


def build_program(rng, n_leaves, n_ops, keep_all=False, seed=None) -> Program:
    """A random program over ``n_leaves`` leaf arrays with up to ``n_ops`` elementwise steps
    (drawn from ``rng``).

    Steps are evaluated with NumPy while they are drawn: only steps NumPy accepts are kept,
    and whether each value may differ from NumPy by ulps is known.
    """
    p = Program(seed, keep_all)
    vals, approx, names = p.vals, p.approx, []
    for i in range(n_leaves):
        dt = LEAF_DTYPES[rng.integers(len(LEAF_DTYPES))]
        shapes = LEAF_SHAPES[:2] if i == 0 else LEAF_SHAPES
        shp = shapes[rng.integers(len(shapes))]
        kind = _VIEW_KINDS[rng.integers(len(_VIEW_KINDS))]
        base, vf, vtext = _make_base(rng, dt, shp, kind)
        p.leaves.append((base, vf, vtext))
        vals.append(vf(base))
        approx.append(0.0)
        names.append(f"x{i}")
    while len(p.steps) < n_ops:
        for _attempt in range(30):
            opname = OP_NAMES[rng.integers(len(OP_NAMES))]
            op = OPS[opname]
            args = []
            n_arrays = 0
            for slot in range(op["nin"]):
                use_const = slot in op["const"] and rng.random() < 0.35
                if use_const and (n_arrays or slot < op["nin"] - 1):
                    args.append(("c", CONSTS[rng.integers(len(CONSTS))]))
                else:
                    last = len(vals) - 1
                    j = last if rng.random() < 0.5 else int(rng.integers(0, last + 1))
                    args.append(("e", j))
                    n_arrays += 1
            extra = CLIP_BOUNDS[rng.integers(len(CLIP_BOUNDS))] if opname == "clip" else None
            arr_args = [approx[a[1]] for a in args if a[0] == "e"]
            if any(arr_args) and (opname not in APPROX_OK or opname == "where" and
                                  approx[args[0][1]]):
                continue      # an ulp-level difference could be amplified (see APPROX_OK)
            py = [vals[a[1]] if a[0] == "e" else a[1] for a in args]
            try:
                with quiet():
                    r = numpy.clip(py[0], *extra) if opname == "clip" else \
                        op["fn"](numpy, *py)
            except Exception:  # noqa: BLE001 - NumPy rejects it: draw another step
                continue
            r = numpy.asarray(r)
            p.steps.append((opname, args, extra))
            vals.append(r)
            # the loosest precision an ulp-level difference went through
            approx.append(max(arr_args + [_rtol(r.dtype)]) if op["approx"] or any(arr_args)
                          else 0.0)
            argtxt = [names[a[1]] if a[0] == "e" else _fmt(a[1]) for a in args]
            if opname == "clip":
                argtxt += [repr(extra[0]), repr(extra[1])]
            names.append(f"t{len(p.steps) - 1}")
            p.exprs.append(f"{opname}({', '.join(argtxt)})")
            break
        else:
            break   # no valid step found: a shorter program
    if p.steps and vals[-1].ndim and rng.random() < 0.4:
        nd = vals[-1].ndim
        kind = REDUCTIONS[rng.integers(len(REDUCTIONS))]
        if approx[-1] and kind not in ("max", "min"):
            kind = "max"      # a sum of values that differ by ulps may cancel
        axes = [None, 0, -1] + ([(0, 1), (1, 0)] if nd == 2 else [])
        axis = axes[rng.integers(len(axes))]
        keepdims = bool(rng.integers(2))
        try:
            with quiet():
                p.red_val = numpy.asarray(getattr(vals[-1], kind)(axis=axis, keepdims=keepdims))
            p.red = (kind, axis, keepdims)
        except Exception:  # noqa: BLE001
            pass
    return p


@st.composite
def programs(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    n_leaves = draw(st.integers(1, 4))
    n_ops = draw(st.integers(2, 8))
    keep_all = draw(st.booleans())
    return build_program(numpy.random.default_rng(seed), n_leaves, n_ops, keep_all, seed)


def _run_lazy(p: Program):
    """Replay ``p`` with lazynp; the forced values of the compared results."""
    pool_vals = [vf(lazynp.asarray(base)) for base, vf, _ in p.leaves]
    for opname, args, extra in p.steps:
        py = [pool_vals[a[1]] if a[0] == "e" else a[1] for a in args]
        if opname == "clip":
            r = lazynp.clip(py[0], *extra)
        else:
            r = OPS[opname]["fn"](lazynp, *py)
        pool_vals.append(r)
    n_leaves = len(p.leaves)
    final = pool_vals[-1]
    inter = pool_vals[n_leaves:-1] if p.keep_all else []
    del pool_vals
    red = None
    if p.red is not None:
        kind, axis, keepdims = p.red
        red = getattr(final, kind)(axis=axis, keepdims=keepdims)
        if not p.keep_all:
            final = None     # only the reduction is needed
    out = [numpy.asarray(red)] if red is not None else []
    if final is not None:
        out = [numpy.asarray(final)] + out
    return [numpy.asarray(t) for t in inter] + out


def _check_reduction(got, p: Program, where):
    kind, axis, keepdims = p.red
    e = p.red_val
    x = p.vals[-1]
    rtol = p.approx[-1]
    if kind in ("sum", "mean") and e.dtype.kind in "fc":
        # summation order differs (NumPy: pairwise; kernel: sequential): bound the error by
        # the sum of magnitudes
        a = numpy.asarray(got)
        assert a.shape == e.shape and a.dtype == e.dtype, \
            f"{where}: {a.dtype}{a.shape} != NumPy's {e.dtype}{e.shape}"
        numpy.testing.assert_array_equal(numpy.isnan(a), numpy.isnan(e), err_msg=where)
        with quiet():
            mag = getattr(numpy.abs(x.astype(e.dtype)), kind)(axis=axis, keepdims=keepdims)
            tol = (1e-5 if e.dtype.itemsize <= 4 else 1e-12) * mag
            ok = numpy.isnan(e) | (a == e) | (numpy.abs(a - e) <= tol)
        assert ok.all(), f"{where}: numpy {e[~ok][:5]} lazynp {a[~ok][:5]} (tol {tol[~ok][:5]})"
    elif rtol:
        assert_close(got, e, where, rtol=rtol)
    else:
        assert_exact(got, e, where)


def check_program(p: Program) -> list:
    """Mismatches between NumPy's and lazynp's results of ``p`` (empty when they agree)."""
    desc = p.describe()
    try:
        with quiet():
            got = _run_lazy(p)
    except Exception as exc:  # noqa: BLE001 - NumPy accepted every step
        return [f"lazynp raised {type(exc).__name__}: {exc}\n    {desc}"]
    n_leaves = len(p.leaves)
    exp = list(zip(p.vals[n_leaves:], p.approx[n_leaves:]))
    exp = exp if p.keep_all else (exp[-1:] if p.red is None else [])
    names = [f"t{k}" for k in range(len(p.steps))][-len(exp):] if exp else []
    for which, a, (e, ap) in zip(names, got, exp):
        try:
            if ap:
                assert_close(a, e, which, rtol=ap)
            else:
                assert_exact(a, e, which)
        except AssertionError as err:
            return [f"{which} differs ({f'rtol {ap}' if ap else 'exact'}): "
                    f"{str(err).strip()[:1500]}\n    {desc}"]
    if p.red is not None:
        try:
            _check_reduction(got[-1], p, "r")
        except AssertionError as err:
            return [f"r differs: {str(err).strip()[:1500]}\n    {desc}"]
    return []


def test_generated_expression_trees(small_work):
    """Random programs (Hypothesis draws the seed, leaf count, step count), evaluated with
    NumPy and with lazynp.  Every example is checked and all mismatches are reported at the
    end, each with its program; no shrinking (every shrink step would compile kernels) --
    the minimal reproducers are the dedicated tests below."""
    s0 = lazynp.stats()
    mismatches = []
    compile_failures = []
    ran = [0, 0]

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.explicit, Phase.generate))
    @given(programs())
    def check(p):
        if not p.steps:
            return
        f0 = stat("kernel_compile_failures")
        r0 = stat("fused_groups_run")
        mismatches.extend(check_program(p))
        ran[0] += 1
        ran[1] += stat("fused_groups_run") > r0
        if stat("kernel_compile_failures") > f0:
            compile_failures.append(p.describe())

    check()
    s1 = lazynp.stats()
    runs = s1["fused_groups_run"] - s0["fused_groups_run"]
    fails = s1["kernel_compile_failures"] - s0["kernel_compile_failures"]
    print(f"\ngenerated trees: {ran[0]} evaluated, {ran[1]} ran >= 1 kernel; "
          f"fused_groups_run +{runs}, fused_groups_numpy "
          f"+{s1['fused_groups_numpy'] - s0['fused_groups_numpy']}, kernel_compiles "
          f"+{s1['kernel_compiles'] - s0['kernel_compiles']}, kernel_cache_hits "
          f"+{s1['kernel_cache_hits'] - s0['kernel_cache_hits']}, "
          f"kernel_compile_failures +{fails}")
    for d in compile_failures:
        print("compile failure in:\n    " + d)
    assert not mismatches, (f"{len(mismatches)} of {ran[0]} generated programs differ from "
                            "NumPy:\n\n" + "\n\n".join(mismatches))
    assert runs >= ran[0] // 2, f"only {runs} fused kernels ran for {ran[0]} programs"
    assert fails <= max(2, runs // 10), f"{fails} kernel compile failures for {runs} runs"


# Minimal reproducers of what the generated trees found (kept failing until lazynp is fixed).

@pytest.mark.parametrize("dtype,const,opname", [
    ("uint8", -1, ">"), ("int8", 300, "<"), ("int8", -129, ">="), ("int8", 1000, "!="),
    ("uint8", 256, "=="),
])
def test_compare_with_out_of_range_python_int(small_work, dtype, const, opname):
    """NumPy 2 compares an integer array with a Python int outside its dtype's range
    exactly (``uint8_array > -1`` is all True); the fused kernel casts the constant into the
    array's dtype first (``-1`` -> ``255``)."""
    fn = {"<": operator.lt, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
          "!=": operator.ne}[opname]
    x = numpy.array([0, 1, 5, 100, 126], dtype=dtype)
    # include the element whose x + 1 equals the constant wrapped into the dtype
    x[0] = numpy.array(const).astype(dtype) - numpy.array(1).astype(dtype)
    expected = fn(x + 1, const)
    r0 = stat("fused_groups_run")
    got = numpy.asarray(fn(lazynp.asarray(x) + 1, const))
    assert stat("fused_groups_run") > r0
    assert_exact(got, expected, f"(x + 1) {opname} {const}")


@pytest.mark.parametrize("dtype,lo,hi", [("int8", -5, 300), ("uint8", -1, 2)])
def test_clip_with_out_of_range_python_int(small_work, dtype, lo, hi):
    """``numpy.clip(int8_array, -5, 300)`` keeps int8 and clips only at -5 (and
    ``numpy.clip(uint8_array, -1, 2)`` only at 2); the kernel casts the out-of-range bound
    into the dtype first (300 -> 44, -1 -> 255) and clips every element to it."""
    x = numpy.array([-128, -1, 0, 1, 60, 127], dtype=numpy.int8).astype(dtype)
    expected = numpy.clip(x * 1, lo, hi)
    r0 = stat("fused_groups_run")
    got = numpy.asarray(lazynp.clip(lazynp.asarray(x) * 1, lo, hi))
    assert stat("fused_groups_run") > r0
    assert_exact(got, expected, f"clip(x * 1, {lo}, {hi})")


def test_power_one_half_matches_numpy(small_work):
    """NumPy evaluates ``x ** 0.5`` (and ``numpy.power(x, 0.5)``) as ``sqrt``: -0.0 -> -0.0
    and -inf -> nan; the kernel calls ``pow``: -0.0 -> 0.0, -inf -> inf."""
    x = numpy.array([-0.0, -numpy.inf, 4.0, 2.0, -1.0])
    with quiet():
        expected = (x * 1) ** 0.5
        got = numpy.asarray((lazynp.asarray(x) * 1) ** 0.5)
    assert_exact(got, expected, "(x * 1) ** 0.5")


# --- 2. trailing-reduction epilogues -------------------------------------------------------

def _red_inputs():
    rng = numpy.random.default_rng(42)
    d = {}
    for shp, tag in (((40, 64), "2"), ((6, 10, 12), "3"), ((33, 150), "w")):
        for name in "abc":
            d[name + tag] = rng.standard_normal(shp)
        nan = rng.standard_normal(shp)
        nan.reshape(-1)[rng.choice(nan.size, 5, replace=False)] = numpy.nan
        d["n" + tag] = nan
        d["i" + tag] = rng.integers(-128, 128, size=shp, dtype=numpy.int8)
        d["j" + tag] = rng.integers(-128, 128, size=shp, dtype=numpy.int8)
        d["k" + tag] = rng.integers(-1000, 1000, size=shp, dtype=numpy.int32)
    return d


RED_INPUTS = _red_inputs()
EXACT, CLOSE = "exact", "close"

RED_CASES = {
    "sum(a*b+c)": (lambda m, v: m.sum(v["a2"] * v["b2"] + v["c2"]), CLOSE),
    "(a*b).sum(0)": (lambda m, v: (v["a2"] * v["b2"]).sum(axis=0), CLOSE),
    "(a*b+c).sum(1,keepdims)": (lambda m, v: (v["a2"] * v["b2"] + v["c2"]).sum(
        axis=1, keepdims=True), CLOSE),
    "(a-b*c).mean(-1)": (lambda m, v: (v["a2"] - v["b2"] * v["c2"]).mean(axis=-1), CLOSE),
    "(n*b+c).max(0) NaN": (lambda m, v: (v["n2"] * v["b2"] + v["c2"]).max(axis=0), EXACT),
    "(n*b+c).min(1) NaN": (lambda m, v: (v["n2"] * v["b2"] + v["c2"]).min(axis=1), EXACT),
    "(n-b).max() NaN": (lambda m, v: (v["n2"] - v["b2"] * 2).max(), EXACT),
    "(a*b-c).min()": (lambda m, v: (v["a2"] * v["b2"] - v["c2"]).min(), EXACT),
    "(a*b>c).any()": (lambda m, v: (v["a2"] * v["b2"] > v["c2"] + 3).any(), EXACT),
    "(a*b>c+9).any(1)": (lambda m, v: (v["a2"] * v["b2"] > v["c2"] + 9).any(axis=1), EXACT),
    "(a+b>-3).all()": (lambda m, v: (v["a2"] + v["b2"] > -3).all(), EXACT),
    "(a+b>-3).all(0)": (lambda m, v: (v["a2"] + v["b2"] > -3).all(axis=0), EXACT),
    "(n*0+1>0).all() NaN": (lambda m, v: (v["n2"] * 0 + 1).all(), EXACT),
    "(a*0.01+1).prod()": (lambda m, v: (v["a2"] * 0.01 + 1).prod(), CLOSE),
    "(a*0.01+1).prod(1)": (lambda m, v: (v["a2"] * 0.01 + 1).prod(axis=1), CLOSE),
    "(i+j).sum() int8": (lambda m, v: (v["i2"] + v["j2"]).sum(), EXACT),
    "(i*j).sum(0) int8": (lambda m, v: (v["i2"] * v["j2"]).sum(axis=0), EXACT),
    "(i-j).max(1) int8": (lambda m, v: (v["i2"] - v["j2"]).max(axis=1), EXACT),
    "(k*k).min() int32": (lambda m, v: (v["k2"] * v["k2"] - v["k2"]).min(), EXACT),
    "(i*2).mean() int8": (lambda m, v: (v["i2"] * 2 + 1).mean(), CLOSE),
    "(k+1).prod(0) int32": (lambda m, v: (v["k2"] % 3 - 1 + v["k2"] * 0).prod(axis=0), EXACT),
    "(a>b).sum(0) bool": (lambda m, v: (v["a2"] + 1 > v["b2"]).sum(axis=0), EXACT),
    "3d sum(0,2)": (lambda m, v: (v["a3"] * v["b3"] + v["c3"]).sum(axis=(0, 2)), CLOSE),
    "3d sum(1,2) keepdims": (lambda m, v: (v["a3"] * v["b3"] + v["c3"]).sum(
        axis=(1, 2), keepdims=True), CLOSE),
    "3d mean(0,1)": (lambda m, v: (v["a3"] - v["b3"] * 0.5).mean(axis=(0, 1)), CLOSE),
    "3d max(0,1) NaN": (lambda m, v: (v["n3"] * v["b3"] - 1).max(axis=(0, 1)), EXACT),
    "3d min(2) keepdims": (lambda m, v: (v["a3"] * v["b3"]).min(axis=2, keepdims=True), EXACT),
    "3d sum() all": (lambda m, v: (v["a3"] * v["b3"] + v["c3"]).sum(), CLOSE),
    "3d int8 sum(1)": (lambda m, v: (v["i3"] * v["j3"] + 1).sum(axis=1), EXACT),
    "3d any(0,2)": (lambda m, v: (v["a3"] * v["b3"] > 2.5).any(axis=(0, 2)), EXACT),
    "3d transposed sum(0)": (lambda m, v: (v["a3"].transpose(2, 0, 1) * 2 + v["c3"].transpose(
        2, 0, 1)).sum(axis=0), CLOSE),
    "3d sum(-1,0) keepdims": (lambda m, v: (v["a3"] * v["b3"] - 1).sum(axis=(-1, 0),
                                                                        keepdims=True), CLOSE),
    "sum(keepdims) full": (lambda m, v: (v["a2"] * v["b2"] + 1).sum(keepdims=True), CLOSE),
    "sum(axis=())": (lambda m, v: (v["a2"] * v["b2"] + 1).sum(axis=()), EXACT),
    "outer product sum(0)": (lambda m, v: (v["a2"][:, :1] * v["b2"][0] + 1).sum(axis=0), CLOSE),
    "outer product max(1) NaN": (lambda m, v: (v["n2"][:, 1:2] * v["b2"][0] - v["c2"][1]).max(
        axis=1), EXACT),
    # leading-axis reductions walk the rows in blocks of 64 columns: 150 = 2 blocks + 22
    "wide (a*b+c).sum(0)": (lambda m, v: (v["aw"] * v["bw"] + v["cw"]).sum(axis=0), CLOSE),
    "wide (n*b).max(0) NaN": (lambda m, v: (v["nw"] * v["bw"]).max(axis=0), EXACT),
    "wide (n-c).min(0, keepdims) NaN": (lambda m, v: (v["nw"] - v["cw"]).min(
        axis=0, keepdims=True), EXACT),
    "wide (i*j).sum(0) int8": (lambda m, v: (v["iw"] * v["jw"]).sum(axis=0), EXACT),
    "wide (a>b).any(0)": (lambda m, v: (v["aw"] > v["bw"] + 2).any(axis=0), EXACT),
    "wide (a<b+3).all(0)": (lambda m, v: (v["aw"] < v["bw"] + 3).all(axis=0), EXACT),
    "uint8 sum(1)": (lambda m, v: (v["i2"].view(numpy.uint8) * 3 + 1).sum(axis=1), EXACT),
    "float any(1) NaN": (lambda m, v: (v["n2"] * 0.0).any(axis=1), EXACT),
}


@pytest.mark.parametrize("case", sorted(RED_CASES))
def test_reduction_epilogue(small_work, case):
    fn, mode = RED_CASES[case]
    lazy_in = {k: lazynp.asarray(v) for k, v in RED_INPUTS.items()}
    with quiet():
        expected = fn(numpy, RED_INPUTS)
        r0 = stat("fused_groups_run")
        got = numpy.asarray(fn(lazynp, lazy_in))
    assert stat("fused_groups_run") > r0, "the group with its epilogue did not run as a kernel"
    expected = numpy.asarray(expected)
    if mode == EXACT:
        assert_exact(got, expected, case)
    else:
        assert_close(got, expected, case, rtol=1e-10)


def test_reduction_epilogue_float32_accuracy():
    """NumPy sums float32 pairwise (relative error ~1e-9 here); a fused sum epilogue must
    stay within float32 tolerance (rtol 1e-5) of it."""
    rng = numpy.random.default_rng(3)
    a = rng.random((2000, 1000), dtype=numpy.float32)
    b = rng.random((2000, 1000), dtype=numpy.float32)
    la, lb = lazynp.asarray(a), lazynp.asarray(b)
    errors = []
    for name, fn in (("sum()", lambda x, y: (x * y + x).sum()),
                     ("mean()", lambda x, y: (x * y + x).mean()),
                     ("sum(axis=1)", lambda x, y: (x * y + x).sum(axis=1)),
                     ("sum(axis=0)", lambda x, y: (x * y + x).sum(axis=0))):
        expected = fn(a, b)
        r0 = stat("fused_groups_run")
        got = numpy.asarray(fn(la, lb))
        assert stat("fused_groups_run") > r0
        assert got.dtype == expected.dtype == numpy.float32
        exact = fn(a.astype(numpy.float64), b.astype(numpy.float64))
        err_np = float(numpy.max(numpy.abs(expected - exact) / exact))
        err_lz = float(numpy.max(numpy.abs(got - exact) / exact))
        if err_lz > 1e-5:
            errors.append(f"float32 (a*b + a).{name} over (2000, 1000): lazynp relative error "
                          f"{err_lz:.2e}, NumPy's {err_np:.2e}")
    assert not errors, "\n".join(errors)


def test_reduction_epilogue_source_also_stored(small_work):
    a, b = RED_INPUTS["a2"], RED_INPUTS["b2"]
    la, lb = lazynp.asarray(a), lazynp.asarray(b)
    t = la * lb + 1
    s = t.sum(axis=0)
    m = (la - lb).max(axis=1, keepdims=True)
    u = la - lb
    assert_close(numpy.asarray(s), (a * b + 1).sum(axis=0), "s", rtol=1e-10)
    assert_exact(numpy.asarray(t), a * b + 1, "t")
    assert_exact(numpy.asarray(m), (a - b).max(axis=1, keepdims=True), "m")
    assert_exact(numpy.asarray(u), a - b, "u")


# --- 3. row softmax -------------------------------------------------------------------------

def test_row_softmax():
    x = numpy.random.default_rng(7).standard_normal((300, 500)) * 4
    lx = lazynp.asarray(x)

    def softmax(m, v):
        e = m.exp(v - v.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    expected = softmax(numpy, x)
    got = numpy.asarray(softmax(lazynp, lx))
    # (with NumPy's SIMD exp on this CPU, exp splits the kernels: see the exp test below)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    numpy.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)
    numpy.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)


# --- 4. views as kernel inputs --------------------------------------------------------------

def _view_inputs():
    rng = numpy.random.default_rng(11)
    return {"A": rng.standard_normal((200, 200)), "B": rng.standard_normal((100, 100)),
            "c": rng.standard_normal(100), "D": rng.standard_normal((10, 20, 30)),
            "I": rng.integers(-100, 100, size=(100, 100), dtype=numpy.int32)}


VIEW_INPUTS = _view_inputs()
VIEW_CASES = {
    "A[::2,1::2]*B.T+1": lambda m, v: v["A"][::2, 1::2] * v["B"].T + 1.0,
    "A[::-2,::-2]-B*2": lambda m, v: v["A"][::-2, ::-2] - v["B"] * 2.0,
    "A[50:150,::-2]*c+B": lambda m, v: v["A"][50:150, ::-2] * v["c"] + v["B"],
    "broadcast_to(c)*B.T-c[:,None]": lambda m, v: m.broadcast_to(v["c"], (100, 100)) * v["B"].T
    - v["c"][:, None],
    "B[:,::-1].T*A[:100,:100][::-1]": lambda m, v: v["B"][:, ::-1].T * v["A"][:100, :100][::-1]
    + v["B"],
    "transpose(D,(2,0,1))*2+D.T[:,:,::-1].swapaxes(1,2)":
        lambda m, v: m.transpose(v["D"], (2, 0, 1)) * 2.0 + v["D"].T.swapaxes(1, 2)[:, :, ::-1]
        * 0.5,
    "I.T[::-1]*3-(I+1)*2": lambda m, v: v["I"].T[::-1] * 3 - (v["I"] + 1) * 2,
    "A[::2,::2][1:-1:3]*B[1:-1:3]": lambda m, v: v["A"][::2, ::2][1:-1:3] * v["B"][1:-1:3] - 1.0,
}


@pytest.mark.parametrize("case", sorted(VIEW_CASES))
def test_views_as_kernel_inputs(case, small_work):
    fn = VIEW_CASES[case]
    lazy_in = {k: lazynp.asarray(v) for k, v in VIEW_INPUTS.items()}
    expected = fn(numpy, VIEW_INPUTS)
    r0 = stat("fused_groups_run")
    got = numpy.asarray(fn(lazynp, lazy_in))
    assert stat("fused_groups_run") > r0, "no fused kernel ran"
    assert_exact(got, expected, case)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("red", ["sum", "max", "mean"])
def test_reductions_of_view_stencils(red, axis, small_work):
    """The nd layout reads views through their owners' flat buffers at run-time offsets and
    strides (negative ones too), also in groups that end in a reduction."""
    a = VIEW_INPUTS["A"]
    la = lazynp.asarray(a)

    def f(m, x):
        s = x[1:-1, 1:-1] * 2.0 + x[2:, :-2] - x[:-2, ::-1][:, 1:-1] * 0.5
        return getattr(m, red)(s, axis=axis)
    r0 = stat("fused_groups_run")
    got = numpy.asarray(f(lazynp, la))
    assert stat("fused_groups_run") > r0, "no fused kernel ran"
    numpy.testing.assert_allclose(got, f(numpy, a), rtol=1e-12, atol=1e-12)


def test_strided_inputs_table():
    """The offsets and strides the nd layout passes: in elements of the owner's flat buffer,
    0 on broadcast dimensions, negative strides as two's complement; None when an input's
    owner is not C-contiguous."""
    from lazynp.kernels.fused import strided_inputs
    a = numpy.arange(60.0).reshape(5, 12)
    v = a[1:, ::-2]
    bufs, table = strided_inputs([v, a[2, :6]], (4, 6))
    assert bufs[0].base is a or bufs[0].base is a.base or numpy.shares_memory(bufs[0], a)
    t = table.view(numpy.int64)
    assert list(t[0]) == [12 + 11, 12, -2] and list(t[1]) == [24, 0, 1]
    for (o, s0, s1), buf, x in zip(t, bufs, (v, numpy.broadcast_to(a[2, :6], (4, 6)))):
        got = numpy.array([[buf[o + i * s0 + j * s1] for j in range(6)] for i in range(4)])
        assert numpy.array_equal(got, x)
    assert strided_inputs([numpy.asfortranarray(a)[:, 1:]], (5, 11)) is None


_ROW_REDUCTION_PROGRAM = """
import numpy, lazynp
from lazynp.core.state import shared
from lazynp.kernels import cpu
shared.min_fused_work = 0
shared.min_kernel_work = 0
seen = []
get = cpu.get_kernel
cpu.get_kernel = lambda source, args, block=False: (seen.append("xs[" in source),
                                                    get(source, args, block))[1]
bad = []
for dtype in ("uint8", "int32", "float64"):
    for shape in ((6, 9), (3, 4, 17), (2, 5)):
        for keep in (False, True):
            x = (numpy.arange(numpy.prod(shape)) * 7 % 101).astype(dtype).reshape(shape)
            with lazynp.policy("lazy"):
                x0 = lazynp.asarray(x)
                t0 = x0 & x0 if dtype != "float64" else x0 + x0
                t1 = lazynp.maximum(t0, t0)
                r = t1.sum(axis=-1, keepdims=True)
                got = [numpy.asarray(t0)] if keep else []
                if not keep:
                    del t0, t1
                got.append(numpy.asarray(r))
            w0 = x & x if dtype != "float64" else x + x
            want = ([w0] if keep else []) + \
                [numpy.maximum(w0, w0).sum(axis=-1, keepdims=True)]
            if not all(g.dtype == w.dtype and numpy.array_equal(g, w)
                       for g, w in zip(got, want)):
                bad.append((dtype, shape, keep))
print("strided kernels", sum(seen), "bad", bad)
"""


def test_strided_inputs_with_a_row_reduction():
    """Kernels reading their inputs through the offset table and ending in a row reduction:
    the offsets were locals named a0, a1... like the reduction's partial sums, so from the
    second row on the inputs were read at the first row's sum (out of bounds: other memory's
    bytes, silently).  Found by test_generated_expression_trees (seed 681); run in a fresh
    interpreter, where the kernels compile at first use (LAZYNP_SYNC_COMPILE)."""
    env = dict(os.environ, LAZYNP_SYNC_COMPILE="1")
    out = subprocess.run([sys.executable, "-c", _ROW_REDUCTION_PROGRAM], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("strided kernels ") and int(line.split()[2]) > 0, line
    assert line.endswith("bad []"), line


def test_kernels_loop_in_the_memory_order_of_a_transposed_input(small_work):
    """An elementwise nd kernel loops over the axes in the memory order of its first
    input that is not broadcast (``y.transpose(0, 3, 1, 2) + b`` walks ``y`` contiguously and
    writes its C-ordered output across planes); the values are NumPy's."""
    from lazynp.kernels.fused import loop_order, strided_inputs
    rng = numpy.random.default_rng(17)
    y = rng.standard_normal((6, 5, 4, 3))
    b = rng.standard_normal(3)
    yt = y.transpose(0, 3, 1, 2)
    table = strided_inputs([yt, b[None, :, None, None]], yt.shape)[1]
    assert loop_order(table, 4) == (0, 2, 3, 1)
    assert loop_order(strided_inputs([y[:, 1:]], (6, 4, 4, 3))[1], 4) is None
    ly, lb = lazynp.asarray(y), lazynp.asarray(b)
    r0 = stat("fused_groups_run")
    got = numpy.asarray(lazynp.maximum(ly.transpose(0, 3, 1, 2) + lb[None, :, None, None],
                                       0.0) * 2.0)
    assert stat("fused_groups_run") > r0, "no fused kernel ran"
    assert_exact(got, numpy.maximum(yt + b[None, :, None, None], 0.0) * 2.0, "transposed")


def test_view_of_group_member_read_in_same_flush():
    """A transposed / reversed view of a value computed in the same flush cannot be read
    in the same loop as it is written."""
    a = numpy.random.default_rng(5).standard_normal((100, 100))
    la = lazynp.asarray(a)
    t = la * 2.0 + 1.0
    u = t.T * 3.0 + t
    w = t[::-1] - t * 0.5
    assert_exact(numpy.asarray(u), (a * 2.0 + 1.0).T * 3.0 + (a * 2.0 + 1.0), "u")
    assert_exact(numpy.asarray(w), (a * 2.0 + 1.0)[::-1] - (a * 2.0 + 1.0) * 0.5, "w")


def test_write_to_base_after_and_before_fused_read():
    a = numpy.random.default_rng(6).standard_normal((100, 100))
    x = lazynp.asarray(a.copy())
    y = x[::2] * 2.0 + 1.0             # reads x before the write
    x[0] = 1000.0
    z = x[::2] * 2.0 + 1.0             # reads x after the write
    ref = a.copy()
    y_exp = ref[::2] * 2.0 + 1.0
    ref[0] = 1000.0
    z_exp = ref[::2] * 2.0 + 1.0
    assert_exact(numpy.asarray(z), z_exp, "after write")
    assert_exact(numpy.asarray(y), y_exp, "before write")
    assert_exact(numpy.asarray(x), ref, "x")


# --- 5. a fused group allocates only its live outputs ---------------------------------------

def _flush_peak(lazy_in):
    """Bytes the flush of ``a*b + c*d - e*0.5`` allocates at its peak (tracemalloc)."""
    a, b, c, d, e = lazy_in
    y = a * b + c * d - e * 0.5
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        lazynp.evaluate(y)      # the flush (numpy.asarray would add a snapshot: lazy policy)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - base, numpy.asarray(y)


def test_fused_group_allocates_only_live_outputs(monkeypatch):
    monkeypatch.setattr(graph_state, "tree_flushes", False)     # (the fusion pass, not a tree)
    n = 2_000_000
    rng = numpy.random.default_rng(1)
    arrs = [rng.standard_normal(n) for _ in range(5)]
    lazy_in = [lazynp.asarray(v) for v in arrs]
    a, b, c, d, e = arrs
    expected = a * b + c * d - e * 0.5
    out_bytes = expected.nbytes
    # warm up: compile the kernel
    _, r = _flush_peak(lazy_in)
    assert_exact(r, expected, "warm-up")
    del r
    kpool.clear()          # no reusable buffer: the flush must allocate its output
    r0 = stat("fused_groups_run")
    grown, r = _flush_peak(lazy_in)
    assert stat("fused_groups_run") == r0 + 1
    assert_exact(r, expected, "fused")
    del r
    monkeypatch.setattr(lconfig, "FUSION", False)
    kpool.clear()
    grown_off, r = _flush_peak(lazy_in)
    assert_exact(r, expected, "unfused")
    del r
    print(f"\npeak growth fused {grown / 2**20:.1f} MiB, unfused {grown_off / 2**20:.1f} MiB "
          f"(one output {out_bytes / 2**20:.1f} MiB)")
    assert grown <= out_bytes + (2 << 20), f"fused flush grew by {grown / 2**20:.1f} MiB"
    assert grown_off >= 2 * out_bytes, "unfused flush should hold temporaries"


# --- 6. intermediates that are still referenced are stored -----------------------------------

def test_referenced_intermediates_are_stored(small_work):
    rng = numpy.random.default_rng(2)
    a = rng.standard_normal((64, 64))
    la = lazynp.asarray(a)
    r0 = stat("fused_groups_run")
    t = la * 2
    u = t + 1
    assert_exact(numpy.asarray(u), a * 2 + 1, "u")
    assert_exact(numpy.asarray(t), a * 2, "t")
    assert stat("fused_groups_run") > r0

    # kept only through a view
    t = la * 3 + 1
    tv = t[::2, ::-1]
    v = t * 2
    del t
    assert_exact(numpy.asarray(v), (a * 3 + 1) * 2, "v")
    assert_exact(numpy.asarray(tv), (a * 3 + 1)[::2, ::-1], "view of intermediate")

    # read by a later reduction that is not the group's epilogue
    t = la * 4 - 1
    w = t * t
    m = t.max(axis=0)
    del t
    assert_exact(numpy.asarray(w), (a * 4 - 1) * (a * 4 - 1), "w")
    assert_exact(numpy.asarray(m), (a * 4 - 1).max(axis=0), "max of intermediate")

    # several outputs of one group, all forced with one flush
    p, q, s = la + 1, la * la, (la + 1) * (la * la)
    lazynp.evaluate(s)
    assert_exact(numpy.asarray(p), a + 1, "p")
    assert_exact(numpy.asarray(q), a * a, "q")
    assert_exact(numpy.asarray(s), (a + 1) * (a * a), "s")


# --- 7. kernel cache ---------------------------------------------------------------------------

def test_kernel_cache_and_constants_as_arguments(small_work):
    rng = numpy.random.default_rng(4)
    x = rng.standard_normal((40, 50))
    lx = lazynp.asarray(x)

    def f(v, c1, c2):
        return (v * c1 + c2) * v - 3.75

    ev0, r0 = compile_events(), stat("fused_groups_run")
    assert_exact(numpy.asarray(f(lx, 1.5, 0.25)), f(x, 1.5, 0.25), "first")
    assert compile_events() == ev0 + 1, "the first use of an expression builds one kernel"
    assert stat("fused_groups_run") == r0 + 1
    ev1 = compile_events()
    c1 = stat("kernel_compiles")
    assert_exact(numpy.asarray(f(lx, 1.5, 0.25)), f(x, 1.5, 0.25), "same expression")
    assert_exact(numpy.asarray(f(lx, 2.5, 0.75)), f(x, 2.5, 0.75), "other constants")
    assert_exact(numpy.asarray(f(lx, -1e10, math.nan)), f(x, -1e10, math.nan), "nan const")
    y = rng.standard_normal((20, 100))    # same dtype, other shape: same flat kernel
    assert_exact(numpy.asarray(f(lazynp.asarray(y), 0.5, 1.0)), f(y, 0.5, 1.0), "other shape")
    assert compile_events() == ev1, "a cached kernel was compiled again"
    assert stat("kernel_compiles") == c1
    assert stat("fused_groups_run") == r0 + 5


# --- group structure: diamonds, merges, writes between groups ------------------------------

def test_group_structures(small_work):
    rng = numpy.random.default_rng(12)
    A, B = rng.standard_normal((20, 30)), rng.standard_normal((20, 30))
    a, b = lazynp.asarray(A), lazynp.asarray(B)
    r0 = stat("fused_groups_run")
    t = a * b
    assert_exact(numpy.asarray((t + 1) - (t * 2)), (A * B + 1) - (A * B * 2), "diamond")
    # two independent groups joined by a node: merged into one
    assert_exact(numpy.asarray((a * 2 + 1) * (b * 3 - 1)), (A * 2 + 1) * (B * 3 - 1), "merge")
    # ... but not when one of them reads a non-fusible result of the other
    assert_exact(numpy.asarray((a * 2 + 1) * (lazynp.sort(a * 2 + 1, axis=1) * 3 - 1)),
                 (A * 2 + 1) * (numpy.sort(A * 2 + 1, axis=1) * 3 - 1), "merge blocked")
    # a write to an input between two groups of the same flush
    x = lazynp.asarray(A.copy())
    t1 = x * 2 + 1
    x[0] = 7.0
    t2 = x * 3 - 1
    X2 = A.copy()
    X2[0] = 7.0
    assert_exact(numpy.asarray(t1 * t2), (A * 2 + 1) * (X2 * 3 - 1), "write between")
    # in-place operators and slice assignment from groups
    y = a * b
    y += 1.0
    y *= 2.0
    assert_exact(numpy.asarray(y), (A * B + 1.0) * 2.0, "in-place operators")
    z = lazynp.zeros((20, 30))
    z[::2] = a[::2] * 2 + b[::2]
    z[1::2] = z[::2] * 3 - 1
    Z = numpy.zeros((20, 30))
    Z[::2] = A[::2] * 2 + B[::2]
    Z[1::2] = Z[::2] * 3 - 1
    assert_exact(numpy.asarray(z), Z, "slice assignment chain")
    # a long loop-built chain
    x, X = a, A
    for _ in range(120):
        x = x * 0.999 + 0.001
        X = X * 0.999 + 0.001
    assert_exact(numpy.asarray(x), X, "chain")
    assert stat("fused_groups_run") >= r0 + 8


def test_small_groups_run_node_by_node_and_large_ones_as_kernels():
    """In a flush that takes the fusion pass, a group with little work runs its nodes one
    by one (a kernel call costs more); a group with enough work runs as one kernel."""
    rng = numpy.random.default_rng(8)
    small, large = rng.random((64, 10)), rng.random((300, 400))
    ls, ll = lazynp.asarray(small), lazynp.asarray(large)
    r0, n0 = stat("fused_groups_run"), stat("fused_groups_numpy")
    a = ((ls * 2.0 + 1.0) * ls - 0.5).sum(axis=1)
    b = ((ll * 2.0 + 1.0) * ll - 0.5).sum(axis=1)
    lazynp.evaluate(a, b)
    ran = stat("fused_groups_run") - r0 + stat("fused_groups_numpy") - n0
    assert ran == 1, "only the large group should run as a fused group"
    assert_close(numpy.asarray(a), ((small * 2.0 + 1.0) * small - 0.5).sum(axis=1), "small")
    assert_close(numpy.asarray(b), ((large * 2.0 + 1.0) * large - 0.5).sum(axis=1), "large")


@pytest.mark.parametrize("kind", ["max", "min", "sum"])
def test_large_strided_full_reductions_compile_without_numba_warnings(kind):
    """A full max/min over a strided view has no parallel loop: its kernel is compiled
    serially instead of making Numba warn (NumbaPerformanceWarning) to the user."""
    x = numpy.random.default_rng(12).random((800, 800))
    lx = lazynp.asarray(x)
    r0 = stat("fused_groups_run")
    # (recorded before the block: under an "error" filter an op that may warn runs at the
    # call, as NumPy's would raise there, and would not fuse)
    expr = getattr(lx.T * 3.0 - 1.0, kind)()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = numpy.asarray(expr)
    assert stat("fused_groups_run") == r0 + 1
    assert_close(got, getattr(x.T * 3.0 - 1.0, kind)(), kind, rtol=1e-12)


# --- math functions NumPy computes with SIMD loops -----------------------------------------

def test_simd_math_functions_run_on_numpy_for_large_arrays():
    """tanh has an AVX-512 loop in NumPy (7x faster than the libm call a kernel makes): on a
    large array the fusion pass leaves it to NumPy, so the result is NumPy's bit for bit and
    the elementwise ops around it still fuse.  Small arrays keep it inside the kernel."""
    from lazynp.ops.elementwise import UFUNC_OPS, numpy_simd
    from lazynp.core.fusion import SIMD_MIN_SIZE
    rng = numpy.random.default_rng(21)
    x = rng.standard_normal((300, 200))
    lx = lazynp.asarray(x)
    r0 = stat("fused_groups_run") + stat("tree_kernels_run")
    got = numpy.asarray(lazynp.tanh(lx * 0.5 + 0.25) * 3.0 - 1.0)
    expected = numpy.tanh(x * 0.5 + 0.25) * 3.0 - 1.0
    # (a kernel of the fusion pass, or tree kernels at this medium size: _policy.decide)
    assert stat("fused_groups_run") + stat("tree_kernels_run") > r0, \
        "the ops around tanh did not fuse"
    if numpy_simd(UFUNC_OPS["tanh"], numpy.dtype(numpy.float64)):
        assert_exact(got, expected, "tanh left to NumPy")
    else:   # no SIMD loop in this NumPy build: tanh stays in the kernel (libm, ~1 ulp)
        assert_close(got, expected, "tanh fused", rtol=1e-13)
    small = x[:2, : SIMD_MIN_SIZE // 4]
    with quiet():
        got_small = numpy.asarray(lazynp.tanh(lazynp.asarray(small) * 0.5 + 0.25) * 3.0)
    assert_close(got_small, numpy.tanh(small * 0.5 + 0.25) * 3.0, "small tanh", rtol=1e-13)


def test_float64_exp_on_large_arrays_is_numpys():
    """float64 exp has a SIMD loop in NumPy: on a large array the kernels around it fuse and
    exp itself is NumPy's, bit for bit (inside a reduction kernel lazynp's own exp did not
    vectorize: a 200k-element exp-max-mean group took 3.5 ms against NumPy's 0.5 ms)."""
    from lazynp.ops.elementwise import UFUNC_OPS, numpy_simd
    assert not numpy_simd(UFUNC_OPS["add"], numpy.dtype(numpy.float64))
    if not numpy_simd(UFUNC_OPS["exp"], numpy.dtype(numpy.float64)):
        pytest.skip("this NumPy build has no SIMD float64 exp loop: exp stays in the kernel")
    z = numpy.random.default_rng(5).standard_normal(50_000)
    lz = lazynp.asarray(z)
    r0 = stat("fused_groups_run")
    got = float(lazynp.maximum(100.0 * lazynp.exp(0.1 + 0.25 * lz) - 105.0, 0.0).mean())
    expected = numpy.maximum(100.0 * numpy.exp(0.1 + 0.25 * z) - 105.0, 0.0)
    assert stat("fused_groups_run") >= r0 + 2, "the ops around exp did not fuse"
    numpy.testing.assert_allclose(got, expected.mean(), rtol=1e-12)


# --- floating-point warnings of large kernels ----------------------------------------------

def _warning_texts(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = numpy.asarray(fn())
    return out, sorted({str(w.message) for w in caught if w.category is RuntimeWarning})


@pytest.mark.parametrize("rows", [600, 1200])      # serial and parallel kernels
@pytest.mark.parametrize("case", ["flat", "2d rows", "sum(axis=0)", "sum(axis=1)", "sum()"])
def test_large_kernels_warn_like_numpy(case, rows):
    """A kernel whose floating-point flags show a condition NumPy warns about is rerun on
    NumPy: the values and the RuntimeWarnings are NumPy's.  The flags are tested once per
    chunk of a parallel loop: the bad values sit in the last rows (the last chunk)."""
    from lazynp.kernels.fused import PARALLEL_MIN
    assert (rows * 500 >= PARALLEL_MIN) == (rows == 1200)
    rng = numpy.random.default_rng(31)
    x = rng.random((rows, 500))
    x[-3, 4] = 1e200         # overflows in x * x
    x[-7, 9] = -1.0          # invalid in sqrt
    lx = lazynp.asarray(x)
    fns = {"flat": lambda m, v: (v * v) * 3.0 + 1.0,
           "2d rows": lambda m, v: m.sqrt(v) * 2.0 + v[0],
           "sum(axis=0)": lambda m, v: m.sum(m.sqrt(v) * 2.0 + 1.0, axis=0),
           "sum(axis=1)": lambda m, v: m.sum(v * v * 2.0 - 1.0, axis=1),
           "sum()": lambda m, v: m.sum(m.sqrt(v) * v)}
    fn = fns[case]
    expected, np_warnings = _warning_texts(lambda: fn(numpy, x))
    assert np_warnings, "the case must make NumPy warn"
    r0 = stat("fused_groups_fp_rerun")
    got, lz_warnings = _warning_texts(lambda: fn(lazynp, lx))
    assert stat("fused_groups_fp_rerun") > r0, "the kernel's flags did not send it to NumPy"
    assert lz_warnings == np_warnings
    assert_close(got, expected, case, rtol=1e-12)


def test_square_of_a_large_array_is_numpys_bit_for_bit():
    """``x ** 2`` in a kernel is ``x * x`` (NumPy's fast path for a scalar 2), not a libm
    ``pow`` per element; the values are identical, also for float32 and int inputs."""
    rng = numpy.random.default_rng(33)
    for x in (rng.standard_normal((300, 200)), rng.standard_normal(70_000).astype("f4"),
              rng.integers(-50, 50, 70_000)):
        lx = lazynp.asarray(x)
        r0 = stat("fused_groups_run") + stat("tree_kernels_run")
        got = numpy.asarray((lx ** 2.0 + lx ** 2) * 0.5)
        assert_exact(got, (x ** 2.0 + x ** 2) * 0.5, f"square {x.dtype}")
        if x.dtype.kind == "f":     # (a fusion-pass kernel, or a tree kernel at this size)
            assert stat("fused_groups_run") + stat("tree_kernels_run") > r0
    x = rng.standard_normal((200_000, 2))
    got = numpy.asarray((lazynp.asarray(x) ** 2).sum(axis=1))
    assert_close(got, (x ** 2).sum(axis=1), "row sums of squares", rtol=1e-15)


def test_large_kernel_flags_follow_errstate():
    x = numpy.random.default_rng(32).random(300_000)
    x[5] = 1e200
    lx = lazynp.asarray(x)
    r0, f0 = stat("fused_groups_run"), stat("fused_groups_fp_rerun")
    with numpy.errstate(over="ignore"):
        # (recorded in a helper's frame, outside the "error" filter: an op that may warn,
        # recorded inside a with block or under an error filter, runs at the call)
        expr = (lambda: lx * lx + 1.0)()
    with numpy.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        got = numpy.asarray(expr)
    assert stat("fused_groups_run") == r0 + 1 and stat("fused_groups_fp_rerun") == f0
    with quiet():
        assert_exact(got, x * x + 1.0, "ignored overflow")
    with numpy.errstate(over="raise"):
        with pytest.raises(FloatingPointError, match="overflow encountered in multiply"):
            numpy.asarray(lx * lx + 2.0)


@pytest.mark.parametrize("with_compare", [False, True])
def test_nan_inputs_do_not_send_kernels_to_numpy(with_compare):
    """NaN flowing through arithmetic raises no flag (NumPy does not warn either); compares
    and maximum on NaN raise flags NumPy's loops do not, which are recognised as such."""
    x = numpy.full(300_000, numpy.nan)
    x[::3] = 1.5
    lx = lazynp.asarray(x)

    def fn(m, v):
        t = v * 2.0 + 1.0
        return (m.maximum(t, 0.5) if with_compare else t * t) - v

    def kernels():      # (a fusion-pass kernel, or a tree kernel at this size)
        return (stat("fused_groups_fp_rerun") + stat("tree_kernels_rejected"),
                stat("fused_groups_run") + stat("tree_kernels_run"))

    f0, r0 = kernels()
    expr = fn(lazynp, lx)   # (recorded outside the "error" filter, which runs ops at once)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = numpy.asarray(expr)
    assert kernels() == (f0, r0 + 1)
    assert_exact(got, fn(numpy, x), "NaN through a kernel")


# --- background compilation and compile failures --------------------------------------------

def test_background_compile_then_kernel(monkeypatch, small_work, tmp_path):
    """The normal mode: the first run of a new group is NumPy's while the kernel compiles on
    a background thread; once compiled the kernel runs, with the same values.  (A kernel
    new to the disk cache: one found there is loaded in the caller at once.)"""
    old_dir, old_bound = kcache.directory(), kcache.max_bytes()
    lazynp.configure(kernel_cache_dir=tmp_path, kernel_cache_max_bytes=0)
    monkeypatch.setattr(kcpu, "_ready", {})
    monkeypatch.setattr(kcpu, "_ready_by_tkey", {})
    monkeypatch.setattr(kcpu, "_kernels", {})
    try:
        _background_compile_then_kernel(monkeypatch)
    finally:
        lazynp.configure(kernel_cache_dir=old_dir, kernel_cache_max_bytes=old_bound)


def _background_compile_then_kernel(monkeypatch):
    monkeypatch.setattr(kcpu, "SYNC_COMPILE", False)
    x = numpy.random.default_rng(13).standard_normal((30, 40))
    lx = lazynp.asarray(x)

    def f(v, m):
        return m.minimum(v * 0.375, 0.5) - m.abs(v) * 1.25

    n0, r0 = stat("fused_groups_numpy"), stat("fused_groups_run")
    assert_exact(numpy.asarray(f(lx, lazynp)), f(x, numpy), "while compiling")
    assert stat("fused_groups_numpy") == n0 + 1 and stat("fused_groups_run") == r0
    kcpu.wait_compiles()
    assert_exact(numpy.asarray(f(lx, lazynp)), f(x, numpy), "compiled")
    assert stat("fused_groups_run") == r0 + 1


def test_compile_failure_falls_back_to_numpy(monkeypatch, small_work):
    def broken(source):
        raise RuntimeError("simulated Numba failure")

    monkeypatch.setattr(kcpu, "_load_module", broken)
    x = numpy.random.default_rng(14).standard_normal((30, 40))
    lx = lazynp.asarray(x)

    def f(v, m):
        return m.maximum(v * -0.625, -0.5) + m.abs(v) * 0.75

    f0, n0 = stat("kernel_compile_failures"), stat("fused_groups_numpy")
    for _ in range(2):
        assert_exact(numpy.asarray(f(lx, lazynp)), f(x, numpy), "after a failed compile")
    assert stat("kernel_compile_failures") == f0 + 1, "a failed kernel is not retried"
    assert stat("fused_groups_numpy") == n0 + 2


# --- 8. buffer pool ---------------------------------------------------------------------------

def test_buffer_pool_reuse(monkeypatch):
    monkeypatch.setattr(graph_state, "tree_flushes", False)     # (the fusion pass, not a tree)
    n = 2_000_000
    rng = numpy.random.default_rng(8)
    a, b, c = (rng.standard_normal(n) for _ in range(3))
    la, lb, lc = lazynp.asarray(a), lazynp.asarray(b), lazynp.asarray(c)
    expected = a * b + c
    h0, r0 = stat("pool_hits"), stat("fused_groups_run")
    first = None
    for i in range(5):
        y = la * lb + lc
        r = numpy.asarray(y)
        assert_exact(r, expected, f"iteration {i}")
        if first is None:
            first, first_lazy = r, y      # still referenced: must never be reused
    assert stat("fused_groups_run") - r0 == 5
    assert stat("pool_hits") > h0, "no pooled buffer was reused"
    assert_exact(first, expected, "result held by the caller was overwritten")
    assert_exact(numpy.asarray(first_lazy), expected, "lazy result held was overwritten")


def test_pooled_buffers_for_numpy_ops():
    """Large results of ops NumPy runs (matmul, a lone ufunc, copy) are written into pooled
    buffers; a result the caller still holds is never handed out again."""
    rng = numpy.random.default_rng(10)
    A, B = rng.standard_normal((256, 300)), rng.standard_normal((300, 256))
    la, lb = lazynp.asarray(A), lazynp.asarray(B)
    h0 = stat("pool_hits")
    held = []
    for i in range(4):
        m = la @ lb
        t = lazynp.tanh(m)
        c = lazynp.copy(t)
        lazynp.evaluate(m, t, c)
        if i < 2:
            held.append((m, t, c))
    assert stat("pool_hits") > h0, "no pooled buffer was reused"
    M = A @ B
    for m, t, c in held:
        assert_exact(numpy.asarray(m), M, "held matmul result")
        assert_exact(numpy.asarray(c), numpy.asarray(t), "held copy")
        assert_close(numpy.asarray(t), numpy.tanh(M), "held tanh", rtol=1e-13)
    assert not numpy.shares_memory(numpy.asarray(held[0][0]), numpy.asarray(held[1][0]))


def test_two_parallel_groups_in_one_flush():
    """Two independent big groups may run on two engine threads at once."""
    n = 2_000_000
    rng = numpy.random.default_rng(9)
    v = [rng.standard_normal(n) for _ in range(6)]
    lv = [lazynp.asarray(x) for x in v]
    r0 = stat("fused_groups_run")
    y1 = lv[0] * lv[1] + lv[2]
    y2 = lv[3] * lv[4] + lv[5]
    lazynp.evaluate(y1, y2)
    assert stat("fused_groups_run") == r0 + 2
    assert_exact(numpy.asarray(y1), v[0] * v[1] + v[2], "y1")
    assert_exact(numpy.asarray(y2), v[3] * v[4] + v[5], "y2")


def _sqrt_chain(m, a, reduce):
    r = m.sqrt(a * 2.0 + 0.5) * 3.0 - 1.0
    return r.sum() if reduce == "all" else r.sum(axis=1) if reduce == "rows" else r


@pytest.mark.parametrize("reduce", ["none", "all", "rows"])
@pytest.mark.parametrize("frac", [0.02, 0.1, 0.2, 0.3])
def test_a_flag_raised_in_several_chunks_of_a_parallel_kernel_warns(frac, reduce):
    """A parallel kernel tests each chunk's floating-point flags: they are OR-ed, not added
    (10% of a 2^20-element array invalid in sqrt: ~6 of 64 chunks raised "invalid", and
    their sum, 6, lost the warning NumPy gives)."""
    a = numpy.ones((1 << 10, 1 << 10))
    a.reshape(-1)[: int(frac * a.size)] = -1.0
    la = lazynp.asarray(a)
    expected, np_warnings = _warning_texts(lambda: _sqrt_chain(numpy, a, reduce))
    assert np_warnings == ["invalid value encountered in sqrt"]
    r0 = stat("fused_groups_fp_rerun")
    got, lz_warnings = _warning_texts(lambda: _sqrt_chain(lazynp, la, reduce))
    assert stat("fused_groups_fp_rerun") > r0, "the kernel's flags did not send it to NumPy"
    assert lz_warnings == np_warnings
    numpy.testing.assert_allclose(got, expected, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
@pytest.mark.parametrize("view", [lambda z: z, lambda z: z[1:-1, 2:], lambda z: z[::-1, ::3],
                                  lambda z: z[:, 5]])
def test_real_and_imaginary_parts_of_a_complex_block_as_kernel_inputs(small_work, dtype, view):
    """``z.real`` and ``z.imag`` are read from the complex block viewed as its parts (stride 2
    in the part's type): a Mandelbrot mask, against NumPy bit for bit, by the kernel."""
    rng = numpy.random.default_rng(21)
    z = (rng.standard_normal((40, 30)) + 1j * rng.standard_normal((40, 30))).astype(dtype)
    lz = view(lazynp.asarray(z) * 1)    # a computed complex block (and views of it)
    nz = view(z * 1)
    expected = [nz.real * nz.real + nz.imag * nz.imag <= 2.0, nz.imag - 2 * nz.real]
    r0 = stat("fused_groups_run")
    got = [lz.real * lz.real + lz.imag * lz.imag <= 2.0, lz.imag - 2 * lz.real]
    got = [numpy.asarray(g) for g in got]
    assert stat("fused_groups_run") > r0
    for g, e in zip(got, expected):
        assert_exact(g, e, "parts of a complex block")

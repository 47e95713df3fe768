"""The ``np`` of generated CUDA kernels: NumPy's elementwise functions, lowered for the device.

The scalar templates of the op table (:mod:`lazynp.ops.elementwise`) call NumPy's functions
(``np.exp({0})``, ``np.isinf({0})``...).  numba-cuda lowers few of NumPy's ufuncs inside a
kernel (``np.exp`` of a float32 is a ``KeyError: <ufunc 'exp'>`` at compile time), so the
CUDA kernel sources import this module as ``np`` (:mod:`lazynp.cuda.codegen`).  Here each
name of :data:`DEVICE_TABLE` is

* under Numba's CUDA simulator: NumPy's own ufunc (the simulator runs kernels in Python);
* on the real target: a stub that numba-cuda types and lowers (``type_callable`` and
  ``lower_builtin``, the body compiled into the calling kernel) with ``numba.cuda.libdevice`` (the ``f``-suffixed function for float32, so float32 stays
  float32) or plain arithmetic, with NumPy's semantics for NaN, infinities and signed zeros
  (``logaddexp`` is NumPy's ``npy_logaddexp``; ``deg2rad`` multiplies by NumPy's constant
  rounded in the dtype).

Every other attribute a kernel reads (``np.float32``, ``np.inf``...) is NumPy's.  A name or
a dtype the table does not cover is a Numba typing error naming the function when the kernel
compiles; :func:`missing_functions` finds such names in a kernel source before that.
"""
from __future__ import annotations

import math
import re

import numpy as _np
from numpy import (bool_, complex64, complex128, float32, float64, inf, int8, int16,  # noqa: F401
                   int32, int64, nan, uint8, uint16, uint32, uint64)

#: NumPy name -> (float32 libdevice function, float64 libdevice function): unary float math
LIBDEVICE_UNARY = {
    "exp": ("expf", "exp"), "expm1": ("expm1f", "expm1"), "exp2": ("exp2f", "exp2"),
    "log": ("logf", "log"), "log2": ("log2f", "log2"), "log10": ("log10f", "log10"),
    "log1p": ("log1pf", "log1p"), "sqrt": ("sqrtf", "sqrt"), "cbrt": ("cbrtf", "cbrt"),
    "sin": ("sinf", "sin"), "cos": ("cosf", "cos"), "tan": ("tanf", "tan"),
    "arcsin": ("asinf", "asin"), "arccos": ("acosf", "acos"), "arctan": ("atanf", "atan"),
    "sinh": ("sinhf", "sinh"), "cosh": ("coshf", "cosh"), "tanh": ("tanhf", "tanh"),
    "arcsinh": ("asinhf", "asinh"), "arccosh": ("acoshf", "acosh"),
    "arctanh": ("atanhf", "atanh"), "floor": ("floorf", "floor"), "ceil": ("ceilf", "ceil"),
    "trunc": ("truncf", "trunc"), "rint": ("rintf", "rint"), "fabs": ("fabsf", "fabs"),
    "reciprocal": ("frcp_rn", "drcp_rn"),
}
#: NumPy name -> (float32, float64) libdevice functions of two float arguments
LIBDEVICE_BINARY = {
    "arctan2": ("atan2f", "atan2"), "hypot": ("hypotf", "hypot"),
    "copysign": ("copysignf", "copysign"), "fmod": ("fmodf", "fmod"),
    "nextafter": ("nextafterf", "nextafter"),
}
#: functions written here (not one libdevice call); the dtype kinds each accepts
#: (b bool, i/u integers, f float32/float64, c complex64/complex128)
COMPOSED = {
    "abs": "biufc", "absolute": "biufc", "conj": "biufc", "conjugate": "biufc",
    "isinf": "biufc", "isfinite": "biufc", "isnan": "biufc", "signbit": "f",
    "deg2rad": "f", "radians": "f", "rad2deg": "f", "degrees": "f", "logaddexp": "f",
    "logaddexp2": "f",
}
#: every function of the table and the dtype kinds it lowers
DEVICE_TABLE = {**{n: "f" for n in LIBDEVICE_UNARY}, **{n: "f" for n in LIBDEVICE_BINARY},
                **COMPOSED}

_CALL = re.compile(r"\bnp\.(\w+)\(")
_NUMPY_TYPES = {"bool_", "float32", "float64", "complex64", "complex128", "int8", "int16",
                "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def missing_functions(source: str) -> list:
    """The ``np.<name>(...)`` calls of a kernel source that this module does not lower."""
    return sorted({m for m in _CALL.findall(source)
                   if m not in DEVICE_TABLE and m not in _NUMPY_TYPES})


def called_functions(source: str) -> list:
    """The table's functions that a kernel source (or one expression of it) calls."""
    return sorted({m for m in _CALL.findall(source) if m in DEVICE_TABLE})


_FLOATS = (_np.dtype(float32), _np.dtype(float64))


def lowers(name: str, dtypes: tuple) -> bool:
    """True when :func:`_install_device` lowers ``np.<name>`` for arguments of ``dtypes``
    (NumPy dtypes): the same rules, asked without numba-cuda's real target (at record
    time, under the simulator too).  A float function takes all-float32 or all-float64
    arguments; the others take the dtype kinds of :data:`COMPOSED`."""
    kinds = DEVICE_TABLE.get(name)
    if kinds is None:
        return False
    dtypes = tuple(_np.dtype(d) for d in dtypes)
    if kinds == "f":
        return dtypes[0] in _FLOATS and all(d == dtypes[0] for d in dtypes)
    return all(d.kind in kinds for d in dtypes)


def _simulated() -> bool:
    from numba import cuda
    return cuda.is_available.__module__.endswith("simulator_init")


def _degree_constants(dt) -> tuple:
    """NumPy's ``NPY_PI/180`` and ``180/NPY_PI``, each computed in ``dt`` (npy_math)."""
    pi, c180 = dt(math.pi), dt(180.0)
    return dt(pi / c180), dt(c180 / pi)


def _install_numpy() -> None:
    """Simulator: the table's names are NumPy's ufuncs."""
    g = globals()
    for name in DEVICE_TABLE:
        g[name] = getattr(_np, name)


def _install_device() -> None:  # pragma: no cover - needs numba-cuda's real target
    """Real target: one stub per name, typed and lowered for numba-cuda.  (Not
    ``@overload``: numba-cuda compiles an overload as a device function, which asks the
    current GPU for its compute capability, so no kernel calling one compiles without a
    GPU, and ``tests/test_cuda_compile.py`` compiles every kernel without one.)"""
    from numba.cuda import libdevice, types
    from numba.cuda.extending import lower_builtin, type_callable

    g = globals()
    f32, f64 = types.float32, types.float64

    def stub(name, nargs):
        if nargs == 1:
            def host_call(x):
                raise NotImplementedError(f"lazynp.cuda.devmath.{name}: kernels only")
        else:
            def host_call(x, y):
                raise NotImplementedError(f"lazynp.cuda.devmath.{name}: kernels only")
        host_call.__name__ = name
        host_call.__qualname__ = name
        g[name] = host_call
        return host_call

    def result_type(name, tys):
        if name in ("isinf", "isnan", "isfinite", "signbit"):
            return types.boolean
        if name in ("abs", "absolute") and isinstance(tys[0], types.Complex):
            return tys[0].underlying_float
        return tys[0]

    def register(name, nargs, choose):
        """Type and lower ``np.<name>`` with ``choose(*arg_types)``'s implementation (a
        Python function compiled into the caller: no device function, which numba-cuda
        could only compile with a GPU present); None: not lowered for those types."""
        fn = stub(name, nargs)
        impls: dict = {}

        def impl_for(tys):
            # (one implementation object per types: compile_internal caches by it)
            if tys not in impls:
                impls[tys] = choose(*tys)
            return impls[tys]

        def typer_of(tys):
            return result_type(name, tys) if impl_for(tys) is not None else None

        if nargs == 1:
            @type_callable(fn)
            def type_unary(context):
                return lambda x: typer_of((x,))
        else:
            @type_callable(fn)
            def type_binary(context):
                return lambda x, y: typer_of((x, y))

        def lower(context, builder, sig, args):
            return context.compile_internal(builder, impl_for(tuple(sig.args)), sig, args)
        lower_builtin(fn, *([types.Any] * nargs))(lower)

    def by_width(fns, impl_of):
        """A chooser of the float32 or float64 implementation by argument types."""
        lo, hi = (getattr(libdevice, f) for f in fns)

        def pick(tys):
            if all(t == f32 for t in tys):
                return impl_of(lo)
            if all(t == f64 for t in tys):
                return impl_of(hi)
            return None
        return pick

    def unary(fn):
        return lambda x: fn(x)

    def binary(fn):
        return lambda x, y: fn(x, y)

    def unary_chooser(pick):
        def ov(x):
            return pick((x,))
        return ov

    def binary_chooser(pick):
        def ov(x, y):
            return pick((x, y))
        return ov

    for name, fns in LIBDEVICE_UNARY.items():
        register(name, 1, unary_chooser(by_width(fns, unary)))
    for name, fns in LIBDEVICE_BINARY.items():
        register(name, 2, binary_chooser(by_width(fns, binary)))

    def ov_abs(x):
        if isinstance(x, types.Boolean) or isinstance(x, types.Integer) and not x.signed:
            return lambda x: x
        if isinstance(x, types.Integer):
            return lambda x: x if x >= 0 else -x        # (wraps at the minimum, as NumPy)
        if x == f32:
            return lambda x: libdevice.fabsf(x)
        if x == f64:
            return lambda x: libdevice.fabs(x)
        if x == types.complex64:
            return lambda x: libdevice.hypotf(x.real, x.imag)
        if x == types.complex128:
            return lambda x: libdevice.hypot(x.real, x.imag)
        return None
    for name in ("abs", "absolute"):
        register(name, 1, ov_abs)

    def ov_conj(x):
        if isinstance(x, types.Complex):
            return lambda x: x.conjugate()
        if isinstance(x, (types.Boolean, types.Integer, types.Float)):
            return lambda x: x
        return None
    for name in ("conj", "conjugate"):
        register(name, 1, ov_conj)

    def float_test(f32_fn, f64_fn, combine, default):
        lo, hi = getattr(libdevice, f32_fn), getattr(libdevice, f64_fn)

        def ov(x):
            if isinstance(x, (types.Boolean, types.Integer)):
                return lambda x: default
            if x == f32:
                return lambda x: lo(x) != 0
            if x == f64:
                return lambda x: hi(x) != 0
            if x == types.complex64:
                return (lambda x: lo(x.real) != 0 or lo(x.imag) != 0) if combine == "or" \
                    else (lambda x: lo(x.real) != 0 and lo(x.imag) != 0)
            if x == types.complex128:
                return (lambda x: hi(x.real) != 0 or hi(x.imag) != 0) if combine == "or" \
                    else (lambda x: hi(x.real) != 0 and hi(x.imag) != 0)
            return None
        return ov
    register("isinf", 1, float_test("isinff", "isinfd", "or", False))
    register("isnan", 1, float_test("isnanf", "isnand", "or", False))
    register("isfinite", 1, 
        float_test("finitef", "isfinited", "and", True))

    def ov_signbit(x):
        if x == f32:
            return lambda x: libdevice.signbitf(x) != 0
        if x == f64:
            return lambda x: libdevice.signbitd(x) != 0
        return None
    register("signbit", 1, ov_signbit)

    def scaled(which):
        c32 = _degree_constants(_np.float32)[which]
        c64 = _degree_constants(_np.float64)[which]

        def ov(x):
            if x == f32:
                return lambda x: x * c32
            if x == f64:
                return lambda x: x * c64
            return None
        return ov
    for name in ("deg2rad", "radians"):
        register(name, 1, scaled(0))
    for name in ("rad2deg", "degrees"):
        register(name, 1, scaled(1))

    def ov_logaddexp(x, y):
        # NumPy's npy_logaddexp: equal arguments (same-signed infinities) without a NaN
        if x == f32 and y == f32:
            ln2 = _np.float32(math.log(2.0))

            def impl32(x, y):
                if x == y:
                    return x + ln2
                d = x - y
                if d > 0:
                    return x + libdevice.log1pf(libdevice.expf(-d))
                if d <= 0:
                    return y + libdevice.log1pf(libdevice.expf(d))
                return d
            return impl32
        if x == f64 and y == f64:
            ln2d = math.log(2.0)

            def impl64(x, y):
                if x == y:
                    return x + ln2d
                d = x - y
                if d > 0:
                    return x + libdevice.log1p(libdevice.exp(-d))
                if d <= 0:
                    return y + libdevice.log1p(libdevice.exp(d))
                return d
            return impl64
        return None
    register("logaddexp", 2, ov_logaddexp)

    def ov_logaddexp2(x, y):
        # NumPy's npy_logaddexp2: log2_1p(exp2(-|d|)) = log1p(exp2(-|d|)) / ln 2
        if x == f32 and y == f32:
            inv_ln2 = _np.float32(1.0 / math.log(2.0))

            def impl32(x, y):
                if x == y:
                    return x + _np.float32(1.0)
                d = x - y
                if d > 0:
                    return x + libdevice.log1pf(libdevice.exp2f(-d)) * inv_ln2
                if d <= 0:
                    return y + libdevice.log1pf(libdevice.exp2f(d)) * inv_ln2
                return d
            return impl32
        if x == f64 and y == f64:
            inv_ln2d = 1.0 / math.log(2.0)

            def impl64(x, y):
                if x == y:
                    return x + 1.0
                d = x - y
                if d > 0:
                    return x + libdevice.log1p(libdevice.exp2(-d)) * inv_ln2d
                if d <= 0:
                    return y + libdevice.log1p(libdevice.exp2(d)) * inv_ln2d
                return d
            return impl64
        return None
    register("logaddexp2", 2, ov_logaddexp2)


if _simulated():
    _install_numpy()
else:
    _install_device()

"""Floating-point exception flags inside Numba kernels, for NumPy's exact warnings.

NumPy warns ("overflow encountered in multiply") by testing the CPU's floating-point status
flags after each ufunc loop.  A fused kernel does the same: it clears the flags when it starts
(per parallel chunk: each thread has its own flags) and returns the flags it raised.  When a
flag the active ``np.errstate`` does not ignore was raised, the caller discards the kernel's
result and runs the group on NumPy, which then warns (or raises) exactly as NumPy does.

``fp_clear()`` and ``fp_test()`` are Numba intrinsics calling C99's ``feclearexcept`` and
``fetestexcept``.  On a platform whose flag values are not known here, ``fp_test()`` is 0.
"""
from __future__ import annotations

import platform

import numpy as np

# (FE_INVALID, FE_DIVBYZERO, FE_OVERFLOW, FE_ALL_EXCEPT) of the C library
_FLAGS = {"x86_64": (0x01, 0x04, 0x08, 0x3F), "amd64": (0x01, 0x04, 0x08, 0x3F),
          "aarch64": (0x01, 0x02, 0x04, 0x1F), "arm64": (0x01, 0x02, 0x04, 0x1F)}
INVALID, DIVBYZERO, OVERFLOW, _ALL = _FLAGS.get(platform.machine().lower(), (0, 0, 0, 0))
SUPPORTED = _ALL != 0


def _intrinsics() -> dict:
    """Build ``fp_clear`` and ``fp_test`` (Numba and llvmlite are imported here, at the first
    kernel source that imports them, not with lazynp)."""
    import ctypes.util

    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    if SUPPORTED:
        import llvmlite.binding as _llvm
        libm = ctypes.util.find_library("m")
        if libm:
            _llvm.load_library_permanently(libm)

    def _call(builder, name: str, arg: int):
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32]), name)
        return builder.call(fn, [ir.Constant(i32, arg)])

    @intrinsic
    def fp_clear(typingctx):
        """Clear this thread's floating-point exception flags."""
        def codegen(context, builder, sig, args):
            if SUPPORTED:
                _call(builder, "feclearexcept", _ALL)
            return context.get_dummy_value()
        return types.none(), codegen

    @intrinsic
    def fp_test(typingctx):
        """This thread's raised invalid / divide-by-zero / overflow flags (an int64 bit
        set)."""
        def codegen(context, builder, sig, args):
            if not SUPPORTED:
                return ir.Constant(ir.IntType(64), 0)
            return builder.sext(_call(builder, "fetestexcept", INVALID | DIVBYZERO | OVERFLOW),
                                ir.IntType(64))
        return types.int64(), codegen

    return {"fp_clear": fp_clear, "fp_test": fp_test}


def __getattr__(name: str):
    # ``from lazynp.kernels.fpflags import fp_clear, fp_test`` (the kernel sources) builds
    # both once; they then stay module globals
    if name in ("fp_clear", "fp_test"):
        built = _intrinsics()
        for key, value in built.items():
            globals().setdefault(key, value)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: ops whose vectorized machine code raises flags on a quiet NaN operand (ordered compares
#: and the max/min built on them set invalid and, on x86 with AVX-512, divide-by-zero too),
#: where NumPy's loops stay silent
NAN_SIGNALING = frozenset({"less", "less_equal", "greater", "greater_equal", "maximum",
                           "minimum", "fmax", "fmin", "clip", "max", "min"})


def maybe_from_nan_compare(flags: int, nodes, inputs) -> bool:
    """True when ``flags`` (invalid / divide-by-zero only) may come from comparing NaN: a
    NaN-signaling op among ``nodes`` and a NaN among the float ``inputs`` (arrays).  Such a
    kernel's result is kept; the price is that a real invalid or divide-by-zero in the same
    kernel goes unreported (docs/numpy-differences.md)."""
    if flags & ~(INVALID | DIVBYZERO) or not any(n.op.name in NAN_SIGNALING for n in nodes):
        return False
    return any(v.dtype.kind in "fc" and np.isnan(v).any() for v in inputs)


def must_rerun(flags: int) -> bool:
    """True when ``flags`` (OR-ed ``fp_test()`` results) include a condition the current
    ``np.errstate`` does not ignore."""
    if not flags:
        return False
    err = np.geterr()
    return bool(flags & INVALID and err["invalid"] != "ignore" or
                flags & DIVBYZERO and err["divide"] != "ignore" or
                flags & OVERFLOW and err["over"] != "ignore")

"""Scalar expressions of elementwise nodes, shared by the CPU and CUDA code generators.

``node_expr(node, operands)`` turns one recorded elementwise node into a scalar expression
string over its operands' expressions, casting operands to the loop dtypes NumPy's ufunc
type resolution picks (NEP 50: Python scalars are weak) and the result to the node's dtype,
so every intermediate wraps/rounds exactly as NumPy's separate calls would.  It returns None
for combinations whose semantics Numba does not reproduce exactly (they stay on NumPy).
"""
from __future__ import annotations

import numpy as np

#: dtypes the generated kernels handle
SUPPORTED = {np.dtype(t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "float32", "float64", "complex64",
                                   "complex128")}

# ufuncs whose integer loops differ between NumPy and Numba (errors, negative powers...)
_FLOAT_ONLY = {"power", "float_power", "reciprocal", "floor_divide", "remainder", "fmod",
               "divide", "true_divide", "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2",
               "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
               "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "degrees",
               "radians", "floor", "ceil", "rint", "trunc", "arctan2", "hypot", "logaddexp",
               "logaddexp2", "copysign", "nextafter", "spacing", "heaviside", "ldexp"}
_NO_COMPLEX = _FLOAT_ONLY | {"maximum", "minimum", "fmax", "fmin", "sign", "floor_divide",
                             "remainder", "less", "less_equal", "greater", "greater_equal",
                             "logical_and", "logical_or", "logical_xor", "logical_not"}
_COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}
_NOT_FUSED = {"ldexp", "frexp", "modf", "divmod", "spacing", "nextafter", "heaviside",
              "bitwise_count", "gcd", "lcm", "isnat", "fmod", "float_power", "cbrt",
              "left_shift", "right_shift", "logaddexp2", "exp2", "log2", "sign", "rint"}

# expressions whose NaN semantics must follow NumPy (Python's max/min do not).  Booleans
# combine with & and | (no short circuit: no branch, so LLVM vectorizes the loop; a mask
# kernel of 624k elements: 980 -> 69 us)
_SPECIAL = {
    "maximum": "({0} if (({0} >= {1}) | ({0} != {0})) else {1})",
    "minimum": "({0} if (({0} <= {1}) | ({0} != {0})) else {1})",
    "fmax": "({0} if (({0} >= {1}) | ({1} != {1})) else {1})",
    "fmin": "({0} if (({0} <= {1}) | ({1} != {1})) else {1})",
    "logical_and": "(bool({0}) & bool({1}))",
    "logical_or": "(bool({0}) | bool({1}))",
    "logical_xor": "(bool({0}) != bool({1}))",
    "logical_not": "(not bool({0}))",
    "isnan": "({0} != {0})",
    "isinf": "(np.isinf({0}))",
    "isfinite": "(np.isfinite({0}))",
}


def np_name(dt: np.dtype) -> str:
    return "np.bool_" if dt.kind == "b" else f"np.{dt.name}"


def cast(expr: str, frm, to: np.dtype) -> str:
    """``expr`` (of dtype ``frm``; None for an already-typed constant) as dtype ``to``."""
    if frm == to:
        return expr
    if to.kind == "b":
        return f"({expr} != 0)"
    return f"{np_name(to)}({expr})"


def _loop_dtypes(node, keys):
    try:
        return node.op.ufunc.resolve_dtypes(tuple(keys) + (None,) * node.op.ufunc.nout)
    except Exception:
        return None


def node_expr(node, operands: list, operand_dtypes: list, operand_keys: list,
              const_exponent: bool = False):
    """Scalar expression for ``node`` or None when it is not fusible.

    ``operands`` are the operands' expression strings, ``operand_dtypes`` their dtypes as
    values inside the kernel, ``operand_keys`` NumPy's dtype-resolution keys (dtype, or the
    Python type of a weak scalar).
    """
    op = node.op
    out = node.dtype
    if out not in SUPPORTED or any(d not in SUPPORTED for d in operand_dtypes):
        return None
    name = op.name
    if name == "astype":
        src = operand_dtypes[0]
        if src.kind in "fc" and out.kind in "iub":
            return None  # NaN/inf to integer is undefined in LLVM
        if src.kind == "c" and out.kind != "c":
            return None
        return cast(operands[0], src, out)
    if name == "copy":
        return operands[0]
    if name == "where":
        c = cast(operands[0], operand_dtypes[0], np.dtype(bool))
        return f"({cast(operands[1], operand_dtypes[1], out)} if {c} else " \
               f"{cast(operands[2], operand_dtypes[2], out)})"
    if name == "clip":
        if out.kind not in "iuf" or len(operands) != 3:
            return None
        if out.kind in "iu" and int in operand_keys and out != np.uint64:
            # a Python-int bound may lie outside the dtype: clip exactly in int64
            i64 = np.dtype(np.int64)
            x, lo, hi = (cast(o, d, i64) for o, d in zip(operands, operand_dtypes))
            mx = _SPECIAL["maximum"].format(x, lo)
            return cast(_SPECIAL["minimum"].format(mx, hi), None, out)
        x, lo, hi = (cast(o, d, out) for o, d in zip(operands, operand_dtypes))
        mx = _SPECIAL["maximum"].format(x, lo)
        return cast(_SPECIAL["minimum"].format(mx, hi), out, out)
    uf = op.ufunc
    if uf is None or op.expr is None or name in _NOT_FUSED or node.params:
        return None
    loop = _loop_dtypes(node, operand_keys)
    if loop is None:
        return None
    ins, outs = loop[:uf.nin], loop[uf.nin:]
    if name in _COMPARISONS and int in operand_keys and \
            all(d.kind in "iub" and d != np.uint64 for d in ins):
        # NumPy 2 compares with a Python int exactly, even out of the dtype's range
        ins = (np.dtype(np.int64),) * len(ins)
    if any(d not in SUPPORTED for d in ins) or outs[0] != out:
        return None
    if name in _FLOAT_ONLY and any(d.kind != "f" for d in ins):
        return None
    if name in _NO_COMPLEX and any(d.kind == "c" for d in ins):
        return None
    if name == "invert" and ins[0].kind == "b":
        expr = "(not {0})"
    elif name == "absolute" and ins[0].kind == "b":
        expr = "{0}"
    elif name in ("bitwise_and", "bitwise_or", "bitwise_xor") and ins[0].kind == "b":
        expr = {"bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})",
                "bitwise_xor": "({0} != {1})"}[name]
    elif name in ("add", "multiply", "subtract", "square", "negative", "positive") and \
            ins[0].kind == "b":
        if name in ("add",):
            expr = "({0} | {1})"
        elif name == "multiply":
            expr = "({0} & {1})"
        else:
            return None
    elif name == "power" and const_exponent:
        # NumPy computes a scalar exponent of 0.5 with sqrt (signed zeros, -inf)
        expr = "(np.sqrt({0}) if {1} == 0.5 else {0} ** {1})"
    elif name == "exp" and ins[0] == np.float64:
        expr = "_fexp({0})"       # vectorizable exp (see kernels/cpu.py)
    elif name in ("isnan", "isinf", "isfinite") and ins[0].kind not in "fc":
        expr = {"isnan": "False", "isinf": "False", "isfinite": "True"}[name]
    else:
        expr = _SPECIAL.get(name, op.expr)
    args = [cast(o, d, t) for o, d, t in zip(operands, operand_dtypes, ins)]
    return cast(expr.format(*args), None, out)


def python_ints_fit(node) -> bool:
    """NumPy 2 compares/clips with an out-of-range Python int exactly; a kernel would first
    convert it to the loop dtype.  True when every Python int argument fits that dtype."""
    args = node.args
    ints = [i for i, a in enumerate(args) if type(a) is int]
    if not ints:
        return True
    op = node.op
    if op.ufunc is not None:
        keys = tuple(type(a) if type(a) in (bool, int, float, complex) else a.dtype
                     for a in args)
        try:
            loop = op.ufunc.resolve_dtypes(keys + (None,) * op.ufunc.nout)
        except Exception:
            return False
        targets = [loop[i] for i in ints]
    else:
        targets = [node.dtype] * len(ints)
    exact_in_int64 = op.name in _COMPARISONS or op.name == "clip"
    for i, d in zip(ints, targets):
        if exact_in_int64 and d.kind in "iub" and d != np.uint64:
            continue
        if d.kind in "iu":
            info = np.iinfo(d)
            if not info.min <= args[i] <= info.max:
                return False
        elif d.kind == "b":
            return False
    return True

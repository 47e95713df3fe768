"""Every elementwise op of the CPU op table either runs on a device (NumPy's values) or
raises at record time, naming the op: never an error at a later read.

``lazynp.cuda.codegen.check_op`` writes the kernel expression the code generator would and
checks each function it calls against the device template table
(``lazynp.cuda.devmath.lowers``, the rules of its real-target lowering).  The kernels
these tests generate are also compiled for sm_90 by ``tests/test_cuda_compile.py``.
"""
from __future__ import annotations

import warnings

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy as np
import pytest

import lazynp as lnp
from lazynp.cuda import codegen, devmath
from lazynp.ops import elementwise as ew

DTYPES = ["bool", "int32", "int64", "float32", "float64", "complex128"]
UFUNCS = sorted(name for name, op in ew.UFUNC_OPS.items()
                if op.ufunc is not None and op.ufunc.nout == 1 and hasattr(lnp, name))


def _operand(dt: str, k: int) -> np.ndarray:
    base = np.array([0.0, 0.5, -1.5, 2.0, 3.0])[::1 if k == 0 else -1]
    if dt == "bool":
        return base > 0.7
    if dt.startswith("complex"):
        return (base + 1j * base[::-1]).astype(dt)
    return base.astype(dt) if dt.startswith("float") else (base * 2).astype(dt)


def _same(got: np.ndarray, want: np.ndarray, name: str) -> None:
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=2e-6 if want.dtype.itemsize <= 8 and
                                   want.dtype.kind == "f" and want.dtype.itemsize == 4
                                   else 1e-12, atol=0, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("dt", DTYPES)
def test_every_elementwise_op_lowers_or_raises_at_record_time(dt):
    ran = raised = 0
    for name in UFUNCS:
        uf = getattr(np, name)
        hosts = [_operand(dt, k) for k in range(uf.nin)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                want = uf(*hosts)
            except TypeError:
                continue                # (NumPy has no loop: not this test's subject)
            except ValueError as e:     # (an integer to a negative power: a value's
                with pytest.raises(ValueError, match=str(e)[:20]):      # error, at the read)
                    np.asarray(getattr(lnp, name)(*[lnp.asarray(h, device="cuda")
                                                    for h in hosts]))
                continue
        devs = [lnp.asarray(h, device="cuda") for h in hosts]
        try:
            res = getattr(lnp, name)(*devs)         # (recorded: nothing runs yet)
        except NotImplementedError as e:            # (LoweringError is one)
            assert name in str(e), (name, str(e))
            raised += 1
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = np.asarray(res)                  # (a later read: must not raise)
        _same(got, want, f"{name}({dt})")
        ran += 1
    assert ran > 20, (ran, raised)


def test_an_op_with_no_device_template_raises_when_recorded(monkeypatch):
    x = lnp.asarray(np.array([1.0, 4.0, 9.0], dtype=np.float32), device="cuda")
    monkeypatch.delitem(devmath.DEVICE_TABLE, "sqrt")
    monkeypatch.setattr(codegen, "_op_problems", {})
    pending = lnp.stats().get("device_flushes")
    with pytest.raises(codegen.LoweringError, match=r"sqrt of float32 .*np\.sqrt"):
        lnp.sqrt(x)
    with pytest.raises(codegen.LoweringError, match="power"):
        x ** 0.5                                     # (the power template calls np.sqrt)
    assert lnp.stats().get("device_flushes") == pending     # (raised before any flush)
    monkeypatch.undo()
    np.testing.assert_allclose(np.asarray(lnp.sqrt(x)), [1.0, 2.0, 3.0])


def test_the_check_follows_the_device_lowering_rules():
    assert devmath.lowers("sqrt", ("float32",)) and devmath.lowers("sqrt", ("float64",))
    assert not devmath.lowers("sqrt", ("complex128",))
    assert not devmath.lowers("arctan2", ("float32", "float64"))     # (no mixed widths)
    assert devmath.lowers("abs", ("complex64",)) and devmath.lowers("isinf", ("int32",))
    assert not devmath.lowers("signbit", ("int32",)) and not devmath.lowers("nope", ("f8",))
    f32 = np.dtype(np.float32)
    assert codegen.op_lowering_problem(ew.UFUNC_OPS["sqrt"], (np.dtype(np.int32),),
                                       np.dtype(np.float64)) is None   # (cast to float64)
    assert codegen.op_lowering_problem(ew.UFUNC_OPS["exp"], (f32,), f32) is None

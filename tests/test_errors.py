"""Errors: lazynp raises NumPy's exception classes, at the user's call when NumPy would.

Shape/dtype/index errors are raised when the operation is *recorded* (before anything is
forced), so each ``pytest.raises`` block below contains only the failing call.  Errors that
depend on data (a singular matrix) are raised when the value is forced, carry a note with
the user's line where the op was recorded, and leave lazynp usable.
"""
from __future__ import annotations

import os
import sys

import numpy
import numpy.exceptions
import pytest

import lazynp

AxisError = numpy.exceptions.AxisError
UFuncTypeError = numpy._core._exceptions.UFuncTypeError


def _raises_both(exc, fn):
    """``fn(np)`` raises ``exc`` (exact class or subclass) for numpy and lazynp, and the
    class lazynp raises is the class numpy raises."""
    with pytest.raises(exc) as e_np:
        fn(numpy)
    before = lazynp.stats()["nodes_executed"]
    with pytest.raises(exc) as e_lz:
        fn(lazynp)
    assert type(e_lz.value) is type(e_np.value), (type(e_lz.value), type(e_np.value))
    return e_np.value, e_lz.value, before


# Each case: (id, expected class, callable np -> raises).  The callables contain no forcing
# operation: lazynp must raise while recording.
AT_CALL = [
    ("broadcast_add", ValueError, lambda np: np.ones(3) + np.ones(4)),
    ("broadcast_2d", ValueError, lambda np: np.ones((2, 3)) * np.ones((3, 2))),
    ("broadcast_inplace_grow", ValueError, lambda np: np.ones(3).__iadd__(np.ones((2, 3)))),
    ("ufunc_out_shape", ValueError, lambda np: np.add(np.ones(3), np.ones(3), out=np.ones(4))),
    ("where_broadcast", ValueError, lambda np: np.where(np.ones(3) > 0, np.ones(4), 0)),
    ("broadcast_to_bad", ValueError, lambda np: np.broadcast_to(np.ones(3), (4, 2))),
    ("clip_broadcast", ValueError, lambda np: np.clip(np.ones(3), np.ones(4), 2)),
    ("sum_bad_axis", AxisError, lambda np: np.ones((2, 3)).sum(axis=2)),
    ("sum_bad_neg_axis", AxisError, lambda np: np.ones((2, 3)).sum(axis=-3)),
    ("mean_bad_axis", AxisError, lambda np: np.ones(3).mean(axis=1)),
    ("argmax_bad_axis", AxisError, lambda np: np.ones((2, 3)).argmax(axis=4)),
    ("cumsum_bad_axis", AxisError, lambda np: np.cumsum(np.ones(3), axis=1)),
    ("sort_bad_axis", AxisError, lambda np: np.sort(np.ones(3), axis=1)),
    ("swapaxes_bad", AxisError, lambda np: np.ones((2, 3)).swapaxes(0, 5)),
    ("expand_dims_bad", AxisError, lambda np: np.expand_dims(np.ones(3), 3)),
    ("concat_bad_axis", AxisError, lambda np: np.concatenate([np.ones(3), np.ones(3)], axis=1)),
    ("sum_repeated_axis", ValueError, lambda np: np.ones((3, 3)).sum(axis=(0, 0))),
    ("transpose_bad_axes", ValueError, lambda np: np.ones((2, 3)).transpose(0, 2)),
    ("squeeze_non1", ValueError, lambda np: np.ones((2, 3)).squeeze(axis=0)),
    ("reshape_bad", ValueError, lambda np: np.ones(6).reshape(4, 2)),
    ("reshape_two_unknown", ValueError, lambda np: np.ones(3).reshape(-1, -1)),
    ("reshape_unknown_bad", ValueError, lambda np: np.ones(3).reshape(2, -1)),
    ("reshape_func_bad", ValueError, lambda np: np.reshape(np.zeros((2, 3)), (3, 3))),
    ("index_oob", IndexError, lambda np: np.ones(6)[6]),
    ("index_oob_neg", IndexError, lambda np: np.ones(6)[-7]),
    ("index_oob_axis1", IndexError, lambda np: np.ones((2, 3))[:, 3]),
    ("index_list_oob", IndexError, lambda np: np.ones(6)[[0, 6]]),
    ("index_numpy_array_oob", IndexError, lambda np: np.ones(6)[numpy.array([0, 6])]),
    ("index_list_oob_2d", IndexError, lambda np: np.ones((3, 4))[[0, 1], [0, 4]]),
    ("too_many_indices", IndexError, lambda np: np.ones(6)[0, 0]),
    ("too_many_indices_slice", IndexError, lambda np: np.ones(6)[:, 0]),
    ("float_index", IndexError, lambda np: np.ones(3)[1.0]),
    ("str_index", IndexError, lambda np: np.ones(3)["a"]),
    ("bool_mask_wrong_len", IndexError, lambda np: np.ones(3)[numpy.array([True, False])]),
    ("fancy_shape_mismatch", IndexError, lambda np: np.ones((3, 3))[[0, 1], [0, 1, 2]]),
    ("zero_d_index", IndexError, lambda np: np.ones(())[0]),
    ("setitem_oob", IndexError, lambda np: np.ones(3).__setitem__(5, 1)),
    ("setitem_fancy_oob", IndexError, lambda np: np.ones(3).__setitem__([0, 3], 1)),
    ("setitem_broadcast", ValueError, lambda np: np.ones(3).__setitem__(slice(None), [1, 2])),
    ("setitem_fancy_broadcast", ValueError,
     lambda np: np.ones(3).__setitem__([0, 1], [1, 2, 3])),
    ("setitem_overflow_uint8", OverflowError, lambda np: np.ones(3, np.uint8).__setitem__(0, 300)),
    ("setitem_negative_uint8", OverflowError, lambda np: np.ones(3, np.uint8).__setitem__(0, -1)),
    ("setitem_nan_into_int", ValueError, lambda np: np.ones(3, int).__setitem__(0, numpy.nan)),
    ("setitem_str_into_int", ValueError, lambda np: np.ones(3, int).__setitem__(0, "x")),
    ("iadd_float_into_int", UFuncTypeError, lambda np: np.zeros(3, int).__iadd__(1.5)),
    ("iadd_complex_into_float", UFuncTypeError,
     lambda np: np.ones(3, np.float32).__iadd__(np.ones(3, complex))),
    ("itruediv_int", UFuncTypeError, lambda np: np.ones(3, int).__itruediv__(2)),
    ("add_out_int", UFuncTypeError, lambda np: np.add(np.ones(3, int), 1.5, out=np.ones(3, int))),
    ("python_int_overflow", OverflowError, lambda np: np.zeros(3, np.int8) + 1000),
    ("python_int_overflow_neg_uint", OverflowError, lambda np: np.ones(3, np.uint8) + (-1)),
    ("python_int_overflow_rsub", OverflowError, lambda np: 300 - np.ones(3, np.uint8)),
    ("add_str", UFuncTypeError, lambda np: np.ones(3) + "a"),
    ("bool_subtract", TypeError, lambda np: np.ones(3, bool) - np.ones(3, bool)),
    ("bool_negative", TypeError, lambda np: -np.ones(3, bool)),
    ("invert_float", TypeError, lambda np: ~np.ones(3)),
    ("and_float", TypeError, lambda np: np.ones(3) & 1),
    ("lshift_float", TypeError, lambda np: np.ones(3) << 1),
    ("int_negative_power", ValueError, lambda np: np.ones(3, int) ** -1),
    ("astype_safe", TypeError, lambda np: np.ones(3).astype(int, casting="safe")),
    ("matmul_core", ValueError, lambda np: np.ones((2, 3)) @ np.ones((2, 3))),
    ("matmul_0d", ValueError, lambda np: np.matmul(np.ones(()), np.ones(3))),
    ("matmul_scalar", ValueError, lambda np: np.ones((2, 2)) @ 3),
    ("matmul_batch", ValueError, lambda np: np.ones((2, 2, 3)) @ np.ones((3, 3, 2))),
    ("dot_mismatch", ValueError, lambda np: np.dot(np.ones(3), np.ones(4))),
    ("tensordot_mismatch", ValueError,
     lambda np: np.tensordot(np.ones((2, 3)), np.ones((4, 2)), axes=1)),
    ("einsum_mismatch", ValueError,
     lambda np: np.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 2)))),
    ("concatenate_mismatch", ValueError,
     lambda np: np.concatenate([np.ones((2, 3)), np.ones((2, 4))])),
    ("concatenate_ndim", ValueError, lambda np: np.concatenate([np.ones((2, 3)), np.ones(3)])),
    ("stack_mismatch", ValueError, lambda np: np.stack([np.ones(3), np.ones(4)])),
    ("vstack_mismatch", ValueError, lambda np: np.vstack([np.ones((2, 3)), np.ones((2, 2))])),
    ("split_unequal", ValueError, lambda np: np.split(np.ones(5), 2)),
    ("repeat_mismatch", ValueError, lambda np: np.repeat(np.ones(3), [1, 2])),
    ("tile_negative", ValueError, lambda np: np.tile(np.ones(3), -1)),
    ("diagonal_1d", ValueError, lambda np: np.diagonal(np.ones(3))),
    ("trace_1d", ValueError, lambda np: np.trace(np.ones(3))),
    ("max_empty", ValueError, lambda np: np.ones((0,)).max()),
    ("min_empty_axis", ValueError, lambda np: np.ones((0, 3)).min(axis=0)),
    ("argmax_empty", ValueError, lambda np: np.ones((0, 3)).argmax()),
    ("zeros_negative", ValueError, lambda np: np.zeros(-1)),
    ("ones_negative", ValueError, lambda np: np.ones((2, -1))),
    ("empty_negative", ValueError, lambda np: np.empty(-1)),
    ("full_negative", ValueError, lambda np: np.full((-1,), 0)),
    ("eye_negative", ValueError, lambda np: np.eye(-1)),
    ("sum_out_shape_0d", ValueError, lambda np: np.ones(3).sum(axis=0, out=np.ones(2))),
    ("max_out_shape_0d", ValueError, lambda np: np.ones(3).max(axis=0, out=np.ones(2))),
    ("sum_out_shape", ValueError,
     lambda np: np.sum(np.ones((2, 3)), axis=0, out=np.ones(2))),
    ("matmul_out_shape", ValueError,
     lambda np: np.matmul(np.ones((2, 3)), np.ones((3, 2)), out=np.ones((3, 3)))),
    ("copyto_scalar_same_kind", TypeError, lambda np: np.copyto(np.zeros(3, int), 1.5)),
    ("copyto_array_same_kind", TypeError,
     lambda np: np.copyto(np.zeros(3, int), np.ones(3))),
    ("slice_step_zero", ValueError, lambda np: np.arange(3)[::0]),
    ("two_ellipses", IndexError, lambda np: np.ones((2, 3))[..., ...]),
    ("concatenate_empty", ValueError, lambda np: np.concatenate([])),
    ("fill_overflow", OverflowError, lambda np: np.zeros(3, np.int8).fill(1000)),
    ("add_at_oob", IndexError, lambda np: np.add.at(np.ones(3), [5], 1)),
    ("add_reduce_bad_axis", AxisError, lambda np: np.add.reduce(np.ones((2, 3)), axis=3)),
    ("zeros_bad_dtype", TypeError, lambda np: np.zeros((2, 3), dtype="foo")),
    ("take_oob", IndexError, lambda np: np.take(np.ones(3), 5)),
    ("item_oob", IndexError, lambda np: np.ones(3).item(5)),
    ("item_size", ValueError, lambda np: np.ones(3).item()),
    ("linalg_inv_nonsquare", numpy.linalg.LinAlgError, lambda np: np.linalg.inv(np.ones((2, 3)))),
    ("linalg_inv_1d", numpy.linalg.LinAlgError, lambda np: np.linalg.inv(np.ones(3))),
    ("linalg_det_1d", numpy.linalg.LinAlgError, lambda np: np.linalg.det(np.ones(3))),
    ("linalg_solve_mismatch", ValueError,
     lambda np: np.linalg.solve(np.ones((3, 3)), np.ones(4))),
    ("linalg_cholesky_nonsquare", numpy.linalg.LinAlgError,
     lambda np: np.linalg.cholesky(np.ones((2, 3)))),
    ("truth_multi", ValueError, lambda np: bool(np.ones(3))),
    ("truth_empty", ValueError, lambda np: bool(np.ones(0))),
    ("truth_if", ValueError, lambda np: (1 if np.arange(3) > 1 else 0)),
    ("truth_and", ValueError, lambda np: np.arange(3) > 0 and True),
    ("float_size2", TypeError, lambda np: float(np.ones(2))),
    ("int_size2", TypeError, lambda np: int(np.ones(2))),
    ("complex_size2", TypeError, lambda np: complex(np.ones(2))),
    ("index_float", TypeError, lambda np: operator_index(np.ones((), float))),
    ("index_1d", TypeError, lambda np: operator_index(np.arange(3))),
    ("list_index_by_array", TypeError, lambda np: [1, 2, 3][np.ones(2, int)]),
    ("range_float", TypeError, lambda np: range(np.ones(()))),
    ("len_0d", TypeError, lambda np: len(np.ones(()))),
    ("len_0d_reduction", TypeError, lambda np: len(np.ones(3).sum())),
    ("iter_0d", TypeError, lambda np: iter(np.ones(()))),
    ("list_0d", TypeError, lambda np: list(np.array(5))),
    ("hash_array", TypeError, lambda np: hash(np.ones(3))),
    ("set_of_arrays", TypeError, lambda np: {np.ones(3)}),
    ("dict_key_array", TypeError, lambda np: {np.ones(3): 1}),
    ("imag_set_real", TypeError, lambda np: setattr(np.ones(3), "imag", 1)),
]


def operator_index(x):
    import operator
    return operator.index(x)


@pytest.mark.parametrize("exc,fn", [c[1:] for c in AT_CALL], ids=[c[0] for c in AT_CALL])
def test_error_raised_at_call(exc, fn):
    _raises_both(exc, fn)


def test_errors_do_not_run_pending_work():
    """Shape errors are found from metadata: raising them runs none of the pending graph."""
    a = lazynp.arange(1000.0) * 0.002 + 1
    b = lazynp.exp(a) - a
    before = lazynp.stats()["nodes_executed"]
    with pytest.raises(ValueError):
        b + lazynp.ones(7)
    with pytest.raises(AxisError):
        b.sum(axis=3)
    with pytest.raises(ValueError):
        b.reshape(7, 7)
    with pytest.raises(IndexError):
        b[1000]
    with pytest.raises(ValueError):
        b @ lazynp.ones((3, 3))
    assert lazynp.stats()["nodes_executed"] == before
    an = numpy.arange(1000.0) * 0.002 + 1
    numpy.testing.assert_allclose(numpy.asarray(b), numpy.exp(an) - an)


def test_failed_inplace_call_leaves_array_unchanged():
    for np in (numpy, lazynp):
        a = np.arange(3)
        with pytest.raises(UFuncTypeError):
            a += 1.5
        with pytest.raises(ValueError):
            a[:] = [1, 2]
        with pytest.raises(OverflowError):
            a[0] = 2 ** 70
        with pytest.raises(ValueError):
            a[0] = "x"
        assert a.tolist() == [0, 1, 2]
        assert a.dtype == numpy.int64


def test_inplace_error_class_is_numpys_exact_subclass():
    with pytest.raises(UFuncTypeError) as e_np:
        a = numpy.zeros(3, int)
        a += 1.5
    with pytest.raises(UFuncTypeError) as e_lz:
        b = lazynp.zeros(3, int)
        b += 1.5
    assert type(e_lz.value) is type(e_np.value)
    assert isinstance(e_lz.value, TypeError)


def test_error_messages_match_numpy_for_common_cases():
    cases = [
        lambda np: np.ones(3) + np.ones(4),
        lambda np: np.ones((2, 3)).sum(axis=2),
        lambda np: np.ones(6).reshape(4, 2),
        lambda np: np.ones(6)[6],
        lambda np: np.ones((2, 3)) @ np.ones((2, 3)),
        lambda np: bool(np.ones(3)),
        lambda np: len(np.ones(())),
        lambda np: np.ones((0,)).max(),
    ]
    for fn in cases:
        msgs = []
        for np in (numpy, lazynp):
            with pytest.raises(Exception) as e:
                fn(np)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


# --- read-only views -------------------------------------------------------------------------

READONLY = [
    ("broadcast_to", lambda np: np.broadcast_to(np.arange(3), (2, 3))),
    ("diagonal", lambda np: np.arange(9).reshape(3, 3).diagonal()),
    ("np_diagonal", lambda np: np.diagonal(np.arange(9).reshape(3, 3))),
    ("sliding_window_view",
     lambda np: np.lib.stride_tricks.sliding_window_view(np.arange(6.0), 3)),
    ("imag_of_real", lambda np: np.arange(4.0).imag),
]


@pytest.mark.parametrize("make", [c[1] for c in READONLY], ids=[c[0] for c in READONLY])
def test_write_to_readonly_view_raises(make):
    for np in (numpy, lazynp):
        v = make(np)
        assert not v.flags.writeable, np.__name__
        with pytest.raises(ValueError, match="read-only"):
            v[0] = 1
        with pytest.raises(ValueError, match="read-only"):
            v += 1


def test_writeable_flag_false_prevents_writes():
    for np in (numpy, lazynp):
        a = np.arange(6)
        a.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 1
        with pytest.raises(ValueError, match="read-only"):
            a += 1
        assert a.tolist() == [0, 1, 2, 3, 4, 5]


# --- runtime (data-dependent) failures ------------------------------------------------------

def _singular(np):
    return np.array([[1.0, 2.0], [2.0, 4.0]])


@pytest.mark.usefixtures("lazy_policy")  # a pending value fails when read
def test_singular_inv_raises_linalgerror_when_forced_with_site_note():
    a = _singular(lazynp)
    b = lazynp.linalg.inv(a); line = sys._getframe().f_lineno  # noqa: E702
    c = b * 2 + 1
    with pytest.raises(numpy.linalg.LinAlgError) as ei:
        c.tolist()
    exc = ei.value
    text = str(exc) + "\n" + "\n".join(getattr(exc, "__notes__", []))
    assert os.path.basename(__file__) in text
    assert f"line {line}" in text
    # forcing the failed array itself also raises the same class
    with pytest.raises(numpy.linalg.LinAlgError):
        numpy.asarray(b)
    with pytest.raises(numpy.linalg.LinAlgError):
        repr(c)
    # lazynp keeps working
    d = lazynp.arange(5.0) * 3
    assert d.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0]
    numpy.testing.assert_allclose(numpy.asarray(lazynp.linalg.inv(lazynp.eye(3) * 2)),
                                  numpy.eye(3) / 2)
    # the input of the failed op is intact
    assert a.tolist() == [[1.0, 2.0], [2.0, 4.0]]


@pytest.mark.usefixtures("lazy_policy")  # a pending value fails when read
def test_singular_inv_large_threaded_path():
    """Big enough that the flush is not run as one bulk push (per-op scheduling)."""
    a = lazynp.zeros((600, 600))
    b = lazynp.linalg.inv(a); line = sys._getframe().f_lineno  # noqa: E702
    c = b + 1
    with pytest.raises(numpy.linalg.LinAlgError) as ei:
        numpy.asarray(c)
    notes = "\n".join(getattr(ei.value, "__notes__", []))
    assert os.path.basename(__file__) in notes and f"line {line}" in notes
    e = lazynp.ones((600, 600)) * 2
    assert float(e.sum()) == 720000.0


@pytest.mark.usefixtures("lazy_policy")  # a pending value fails when read
def test_failure_does_not_poison_unrelated_arrays_in_same_flush():
    bad = lazynp.linalg.inv(_singular(lazynp))
    good = lazynp.arange(3.0) * 2
    with pytest.raises(numpy.linalg.LinAlgError):
        lazynp.evaluate(bad, good)
    assert good.tolist() == [0.0, 2.0, 4.0]


@pytest.mark.usefixtures("lazy_policy")  # a pending value fails when read
def test_failure_does_not_poison_unrelated_loop_with_bound_flushes():
    """A pending failing op must not break an unrelated long loop (whose graph is flushed
    by the size bound, which flushes every live pending array)."""
    bad = lazynp.linalg.inv(_singular(lazynp))
    x = lazynp.arange(3.0)
    for _ in range(5000):
        x = x + 1
    assert x.tolist() == [5000.0, 5001.0, 5002.0]
    with pytest.raises(numpy.linalg.LinAlgError):
        bad.tolist()


def test_lazy_index_array_oob_raises_indexerror_when_forced():
    idx = lazynp.arange(3) * 3          # [0, 3, 6]; a lazy index is checked when it runs
    a = lazynp.ones(6)
    try:
        r = a[idx]
    except IndexError:
        return                          # raising at the call is fine too
    with pytest.raises(IndexError):
        r.tolist()
    assert (a * 2).tolist() == [2.0] * 6


@pytest.mark.usefixtures("lazy_policy")  # a pending value fails when read
def test_runtime_error_in_write_keeps_other_arrays_usable():
    a = lazynp.ones((2, 2))
    bad = lazynp.linalg.inv(_singular(lazynp))
    a[...] = bad  # shapes agree: recorded fine; fails when run
    with pytest.raises(numpy.linalg.LinAlgError):
        a.tolist()
    z = lazynp.zeros(3) + 1
    assert z.tolist() == [1.0, 1.0, 1.0]


def test_cholesky_not_positive_definite_raises_when_forced():
    m = lazynp.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(numpy.linalg.LinAlgError):
        numpy.asarray(lazynp.linalg.cholesky(m))


def test_errstate_raise_divide_by_zero():
    """With errstate(divide='raise') NumPy raises FloatingPointError; lazynp must raise it
    too (at the call or when forced inside the same errstate block)."""
    with numpy.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            numpy.ones(3) / numpy.zeros(3)
    with lazynp.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            r = lazynp.ones(3) / lazynp.zeros(3)
            numpy.asarray(r)


def test_errstate_ignore_is_respected_when_forced_later():
    """Recorded under errstate(all='raise') ... forced outside: NumPy raised at the call.
    Recorded under errstate(all='ignore') and forced outside: no warning/exception must
    escape (NumPy computed silently)."""
    import warnings
    with lazynp.errstate(all="ignore"):
        r = lazynp.ones(3) / lazynp.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with numpy.errstate(all="warn"):
            v = numpy.asarray(r)
    assert numpy.isinf(v).all()


# --- NumPy's own objects are reused ------------------------------------------------------------

def test_reused_numpy_objects():
    assert lazynp.linalg.LinAlgError is numpy.linalg.LinAlgError
    assert lazynp.float32 is numpy.float32
    assert lazynp.float64 is numpy.float64
    assert lazynp.int8 is numpy.int8
    assert lazynp.bool_ is numpy.bool_
    assert lazynp.dtype is numpy.dtype
    assert lazynp.pi == numpy.pi
    assert lazynp.e == numpy.e
    assert lazynp.inf == numpy.inf
    assert numpy.isnan(lazynp.nan)
    assert lazynp.newaxis is None
    assert lazynp.errstate is numpy.errstate
    # (lazynp.testing: numpy.testing's assertions converting lazynp arrays first; the rest
    # is numpy.testing's own objects)
    assert lazynp.testing.assert_raises is numpy.testing.assert_raises
    assert lazynp.testing.suppress_warnings is numpy.testing.suppress_warnings
    assert lazynp.finfo is numpy.finfo
    assert lazynp.iinfo is numpy.iinfo
    assert lazynp.exceptions.AxisError is numpy.exceptions.AxisError
    assert lazynp.AxisError is numpy.exceptions.AxisError if hasattr(numpy, "AxisError") \
        else True


def test_lazynp_testing_accepts_lazy_arrays():
    lazynp.testing.assert_array_equal(lazynp.arange(3), numpy.arange(3))
    lazynp.testing.assert_allclose(lazynp.ones(3) / 3, numpy.ones(3) / 3)
    with pytest.raises(AssertionError):
        lazynp.testing.assert_array_equal(lazynp.arange(3), numpy.arange(1, 4))


def test_matmul_shape_error_raised_on_every_call():
    """matmul caches result shapes by operand shapes; a bad pair raises NumPy's error each
    time (it is never cached as a result)."""
    a = lazynp.ones((3, 4))
    for _ in range(2):
        with pytest.raises(ValueError, match="mismatch in its core dimension"):
            a @ a
    assert (a @ lazynp.ones((4, 2))).shape == (3, 2)


@pytest.mark.usefixtures("lazy_policy")  # a pending value fails when read
def test_run_time_error_read_through_later_ops_names_its_own_line_once():
    """A value-dependent error (singular matrix) read through later operations is raised
    with one note: the line that recorded the failing operation."""
    import inspect
    a = lazynp.linalg.inv(lazynp.zeros((2, 2))); line = inspect.currentframe().f_lineno
    b = (a + 1) * 2
    with pytest.raises(numpy.linalg.LinAlgError) as ei:
        numpy.asarray(b)
    notes = [n for n in getattr(ei.value, "__notes__", []) if "recorded at" in n]
    assert len(notes) == 1 and f"line {line}," in notes[0], notes


def test_value_dependent_errors_of_computed_work_raise_at_the_call():
    """Small work on computed arrays runs at once (the execution policy): NumPy's error
    reaches the user's ``try`` around the call, as in NumPy."""
    a = lazynp.asarray(numpy.ones((3, 3)))
    try:
        inv = lazynp.linalg.inv(a)
    except numpy.linalg.LinAlgError:
        inv = lazynp.linalg.pinv(a)
    numpy.testing.assert_allclose(numpy.asarray(inv), numpy.linalg.pinv(numpy.ones((3, 3))))
    with numpy.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            lazynp.asarray(numpy.ones(4)) / 0.0

"""``np.reshape`` where NumPy copies (a transposed or strided view: stockham_fft's
``np.reshape(np.transpose(yv, (1, 0, 2)), (N,))`` each step) is recorded as the ``reshape``
call with its template built directly: the values, shapes, dtypes and errors are NumPy's, and
the gradient rule of ``reshape`` still applies."""
import numpy
import pytest

import lazynp


def _source():
    return numpy.arange(2 * 3 * 4 * 5, dtype=numpy.float64).reshape(2, 3, 4, 5) * 0.5 - 7


@pytest.mark.parametrize("shape", [(-1,), 120, (4, -1), (5, 4, 6), (-1, 2, 3), (1, 120, 1),
                                   (120, -1), (-2, 60), numpy.int64(120)])
@pytest.mark.parametrize("order", ["C", "F", "A"])
@pytest.mark.parametrize("make", [
    lambda m: m.transpose(1, 0, 3, 2),
    lambda m: m.transpose(3, 1, 2, 0),
    lambda m: m.swapaxes(0, 2),
])
def test_a_copying_reshape_is_numpys(shape, order, make):
    src = make(_source())
    want = numpy.reshape(src, shape, order=order)
    got = lazynp.reshape(make(lazynp.array(_source())), shape, order=order)
    assert got.shape == want.shape and got.dtype == want.dtype
    numpy.testing.assert_array_equal(numpy.asarray(got), want, strict=True)


@pytest.mark.parametrize("shape", [(7, -1), (-1, -1), (121,), (2.0, 60), "x", (0, -1)])
def test_a_bad_shape_raises_numpys_error(shape):
    src = _source().transpose(1, 0, 3, 2)
    with pytest.raises(Exception) as want:
        numpy.reshape(src, shape)
    with pytest.raises(type(want.value)) as got:
        lazynp.reshape(lazynp.array(_source()).transpose(1, 0, 3, 2), shape)
    assert str(got.value) == str(want.value)


def test_copy_false_raises_and_copy_true_copies():
    src = _source().transpose(1, 0, 3, 2)
    lz = lazynp.array(_source()).transpose(1, 0, 3, 2)
    with pytest.raises(ValueError):
        numpy.reshape(src, (-1,), copy=False)
    with pytest.raises(ValueError):
        lazynp.reshape(lz, (-1,), copy=False)
    r = lazynp.reshape(lz, (-1,))
    r[0] = 1e9                       # a copy: the source does not see the write
    assert numpy.asarray(lz)[0, 0, 0, 0] == src[0, 0, 0, 0]


def test_large_pending_input_records_the_reshape_call():
    """A large pending source: the reshape is recorded (one flush later) and the
    values are NumPy's."""
    x0 = numpy.random.default_rng(1).standard_normal((600, 1000))
    x = lazynp.array(x0) * 2.0               # pending
    r = lazynp.reshape(x.T, (-1,))
    assert r.shape == (600000,)
    numpy.testing.assert_array_equal(numpy.asarray(r), numpy.reshape((x0 * 2.0).T, (-1,)),
                                     strict=True)


def test_gradient_through_a_copying_reshape():
    w = numpy.random.default_rng(2).standard_normal(12)
    x0 = numpy.random.default_rng(3).standard_normal((3, 4))

    def f(x):
        return (lazynp.reshape(x.T, (-1,)) * w).sum()
    g = numpy.asarray(lazynp.grad(f)(lazynp.array(x0)))
    numpy.testing.assert_allclose(g, numpy.reshape(w, (4, 3)).T, rtol=0, atol=0)


def test_a_plain_shape_builds_its_template_without_lazy_call(monkeypatch):
    from lazynp.array import views
    calls = []
    real = views.lazy_call
    monkeypatch.setattr(views, "lazy_call", lambda *a, **k: calls.append(1) or real(*a, **k))
    src = lazynp.array(_source()).transpose(1, 0, 3, 2)
    numpy.testing.assert_array_equal(numpy.asarray(lazynp.reshape(src, (4, -1))),
                                     numpy.reshape(_source().transpose(1, 0, 3, 2), (4, -1)))
    assert calls == []
    lazynp.reshape(src, (-2, 60))              # (NumPy's own reading of the shape)
    assert calls == [1]


def test_a_copy_of_a_computed_array_runs_at_once_and_of_a_large_pending_one_is_numpys():
    from lazynp.core import policy
    lz = lazynp.array(_source()).transpose(1, 0, 3, 2)
    before = lazynp.stats()
    r = lazynp.reshape(lz, (-1,))
    after = lazynp.stats()
    assert after["ops_eager"] - before["ops_eager"] == 1
    assert after["ops_recorded"] == before["ops_recorded"]
    assert r._eager_value() is not None                  # computed: NumPy's copy
    n = policy.EAGER_MAX_ELEMS
    big = (lazynp.arange(2 * n, dtype=numpy.float64) * 2.0).reshape(2, n).T
    flat = lazynp.reshape(big, (-1,))     # (the recorded call: the policy decides)
    want = (numpy.arange(2 * n, dtype=numpy.float64) * 2.0).reshape(2, n).T.reshape(-1)
    numpy.testing.assert_array_equal(numpy.asarray(flat), want, strict=True)

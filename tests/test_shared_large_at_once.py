"""Work on a large array whose buffer the caller's NumPy code holds too (``asarray`` of a
NumPy array): the policy runs it at once (``policy.decide_on_nodes``: shared), and the C
operator and ufunc paths run it there, with NumPy's temporary elision, instead of handing
it to the recorder's at-once path (which has no elision: a chain on such inputs of 2^19 to
2^21 elements ran at 0.44-0.63x NumPy's speed).  Values, dtypes and warnings are NumPy's."""
import warnings

import numpy
import pytest

import lazynp
from lazynp._base import native as _native
from lazynp.core import policy as _policy

N = _policy.EAGER_MAX_ELEMS          # from the size bound: a computed array would record


def _inputs(evaluate):
    rng = numpy.random.default_rng(7)
    a0, b0 = rng.random(N), rng.random(N)
    a, b = lazynp.asarray(a0), lazynp.asarray(b0)
    if evaluate:                     # (an evaluated array carries its Var: still shared)
        a, b = lazynp.evaluate(a), lazynp.evaluate(b)
    return a0, b0, a, b


def _chain(m, a, b):
    return m.sqrt((a * 1.5 + b) * a - 0.25 + m.exp(b))


@pytest.mark.parametrize("evaluate", [False, True])
def test_a_chain_on_shared_inputs_gives_numpy_bits(evaluate):
    a0, b0, a, b = _inputs(evaluate)
    want = _chain(numpy, a0, b0)
    got = _chain(lazynp, a, b)
    numpy.testing.assert_array_equal(numpy.asarray(got), want, strict=True)
    numpy.testing.assert_array_equal(numpy.asarray(a < b), a0 < b0, strict=True)
    numpy.testing.assert_array_equal(numpy.asarray(-a), -a0, strict=True)


@pytest.mark.skipif(_native.ext is None, reason="the C recorder's elision")
@pytest.mark.parametrize("evaluate", [False, True])
def test_temporaries_of_shared_inputs_are_elided(evaluate):
    a0, b0, a, b = _inputs(evaluate)
    before = lazynp.stats()["elided"]
    got = ((a * 1.5 + b) * a) - b
    elided = lazynp.stats()["elided"] - before
    # (the recorder's at-once path never elides: all three writes into a temporary are
    # the C path's)
    assert elided == 3
    numpy.testing.assert_array_equal(numpy.asarray(got), ((a0 * 1.5 + b0) * a0) - b0,
                                     strict=True)


def test_a_shared_input_still_gives_numpy_warnings_at_the_call():
    a0 = numpy.zeros(N)
    a = lazynp.asarray(a0)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        r = 1.0 / a
    assert numpy.isinf(numpy.asarray(r)).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with numpy.errstate(divide="ignore"):
            numpy.asarray(numpy.log(a))


def test_a_write_into_the_shared_numpy_array_is_seen_by_later_work():
    # run at once: the later write into the caller's NumPy array does not change a
    # result already taken
    a0 = numpy.ones(N)
    a = lazynp.asarray(a0)
    r = a * 2.0 + 1.0
    a0[:] = 5.0
    numpy.testing.assert_array_equal(numpy.asarray(r), numpy.full(N, 3.0))
    numpy.testing.assert_array_equal(numpy.asarray(a * 2.0), numpy.full(N, 10.0))

"""``lazynp.autograd.misc``: autograd's ``flatten`` (a pytree to one vector and back,
differentiable both ways) and ``const_graph`` (the graph replayed, not the Python code)."""
from __future__ import annotations

import numpy
import pytest

import lazynp as np
from lazynp.autograd.misc import const_graph, flatten

RNG = numpy.random.default_rng(0)


def test_flatten_order_shapes_and_round_trip():
    tree = (1.0, RNG.standard_normal((2, 3)),
            [RNG.standard_normal((1, 4)), {"y": RNG.standard_normal((4, 2)), "x": 2.0}])
    flat, unflatten = flatten(tree)
    expected = numpy.concatenate([[1.0], tree[1].ravel(), tree[2][0].ravel(), [2.0],
                                  tree[2][1]["y"].ravel()])      # dict keys sorted
    numpy.testing.assert_array_equal(numpy.asarray(flat), expected)
    back = unflatten(flat * 2)
    assert isinstance(back, tuple) and isinstance(back[2], list) and \
        isinstance(back[2][1], dict)
    assert back[1].shape == (2, 3) and back[2][1]["y"].shape == (4, 2)
    numpy.testing.assert_array_equal(numpy.asarray(back[1]), tree[1] * 2)
    assert float(back[0]) == 2.0 and numpy.ndim(back[0]) == 0


def test_flatten_empty_complex_and_dtype():
    flat, unflatten = flatten(((), []))
    assert flat.shape == (0,) and flat.dtype == numpy.float64
    assert unflatten(flat) == ((), [])
    flat, unflatten = flatten([1 + 1j, numpy.ones(2, numpy.float32)])
    assert flat.dtype == numpy.complex128
    assert complex(unflatten(flat)[0]) == 1 + 1j


def test_unflatten_checks_the_vector_shape():
    _, unflatten = flatten([numpy.ones(3), 2.0])
    with pytest.raises(ValueError, match="shape \\(4,\\)"):
        unflatten(np.ones(5))


def test_flatten_rejects_non_numeric_leaves():
    with pytest.raises(TypeError, match="flatten"):
        flatten([numpy.ones(2), None])


def test_gradient_through_flatten_and_unflatten():
    # flatten of traced values (autograd issue #232) and unflatten inside the function
    g = np.grad(lambda x, y: np.sum(flatten([x, y])[0] ** 2), argnum=(0, 1))(1.0, 2.0)
    assert [float(v) for v in g] == [2.0, 4.0]
    params = {"w": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}
    flat, unflatten = flatten(params)

    def loss(v):
        p = unflatten(v)
        return np.sum(np.tanh(np.ones(3) @ p["w"] + p["b"]))
    got = numpy.asarray(np.grad(loss)(flat))
    t = 1 - numpy.tanh(numpy.ones(3) @ params["w"] + params["b"]) ** 2
    expected = numpy.concatenate([t, numpy.outer(numpy.ones(3), t).ravel()])   # b, then w
    numpy.testing.assert_allclose(got, expected, rtol=1e-12)


def test_const_graph_replays_without_running_python():
    calls = []

    def foo(x, y):
        calls.append(None)
        return np.grad(lambda x: np.sin(x) + x * 2)(x * y)

    wrapped = const_graph(foo)
    assert calls == []
    for x, y in [(0.0, 0.0), (1.0, 0.5), (2.0, -3.0)]:
        assert float(wrapped(x, y)) == pytest.approx(numpy.cos(x * y) + 2, rel=1e-14)
    assert len(calls) == 1              # traced once: new values of numbers do not retrace


def test_const_graph_binds_arguments_and_retraces_on_a_new_shape():
    calls = []

    def foo(x, y, z):
        calls.append(numpy.shape(y))
        return x + 2 * y + 3 * z

    wrapped = const_graph(foo, 1.0, z=3.0)
    assert float(wrapped(2.0)) == 14.0 and float(wrapped(5.0)) == 20.0
    numpy.testing.assert_array_equal(numpy.asarray(wrapped(numpy.arange(3.0))),
                                     1.0 + 2 * numpy.arange(3.0) + 9.0)
    assert calls == [(), (3,)]

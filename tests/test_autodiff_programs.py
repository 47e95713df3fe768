"""Gradients of whole NumPy-style programs, checked against finite differences (and against
the ``autograd`` package when it is installed)."""
from __future__ import annotations

import numpy
import pytest

import lazynp as lnp

from test_autodiff import check_grads

try:  # pragma: no cover - optional oracle
    import autograd as _ag
    import autograd.numpy as _agnp
except ImportError:  # pragma: no cover
    _ag = None

R = numpy.random.RandomState(0)


def _np(x):
    return numpy.asarray(x, dtype=numpy.float64)


def _compare_autograd(make, *args, argnums=0):
    """Run the same program (written against module ``np``) with autograd, if installed."""
    if _ag is None:
        return
    ours = lnp.grad(make(lnp), argnums)(*args)
    theirs = _ag.grad(make(_agnp), argnums)(*[numpy.asarray(a) for a in args])
    numpy.testing.assert_allclose(_np(ours), theirs, rtol=1e-8, atol=1e-10)


def mlp_loss(np):
    def loss(W1, b1, W2, b2, X, y):
        h = np.tanh(X @ W1 + b1)
        logits = h @ W2 + b2
        m = np.max(logits, axis=1, keepdims=True)
        lse = np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True)) + m
        logp = logits - lse
        return -np.mean(logp[np.arange(X.shape[0]), y])
    return loss


def test_mlp_softmax_cross_entropy():
    X = R.standard_normal((8, 5))
    y = R.randint(0, 3, size=8)
    W1, b1 = R.standard_normal((5, 4)) * 0.5, R.standard_normal(4) * 0.1
    W2, b2 = R.standard_normal((4, 3)) * 0.5, R.standard_normal(3) * 0.1
    loss = mlp_loss(lnp)
    check_grads(lambda W1, b1, W2, b2: loss(W1, b1, W2, b2, lnp.asarray(X), y),
                W1, b1, W2, b2, order=2)
    _compare_autograd(lambda np: (lambda W1: mlp_loss(np)(W1, b1, W2, b2, X, y)), W1)


def test_logistic_regression():
    X = R.standard_normal((20, 4))
    t = (R.uniform(size=20) > 0.5).astype(float)

    def nll(w, b):
        z = X @ w + b
        return lnp.sum(lnp.logaddexp(0.0, z) - t * z) / len(t) + 0.01 * lnp.sum(w * w)

    check_grads(nll, R.standard_normal(4), numpy.array(0.3), order=2)
    # a few gradient-descent steps reduce the loss
    w, b = lnp.zeros(4), lnp.asarray(0.0)
    g = lnp.value_and_grad(nll, argnums=(0, 1))
    l0, _ = g(w, b)
    for _ in range(20):
        l, (gw, gb) = g(w, b)
        w, b = w - 0.5 * gw, b - 0.5 * gb
    assert float(l) < float(l0)


def test_gaussian_loglik_cholesky():
    n = 4
    Y = R.standard_normal((6, n))

    def loglik(A, mu):
        S = A @ A.T + n * lnp.eye(n)
        L = lnp.linalg.cholesky(S)
        D = Y - mu
        Z = lnp.linalg.solve(L, D.T)                 # L^-1 (y - mu)
        logdet = 2.0 * lnp.sum(lnp.log(lnp.diagonal(L)))
        return -0.5 * lnp.sum(Z * Z) - 0.5 * Y.shape[0] * logdet

    check_grads(loglik, R.standard_normal((n, n)), R.standard_normal(n), order=2)


def test_rosenbrock():
    def rosen(x):
        return lnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    x = R.uniform(-1, 1, 6)
    check_grads(rosen, x, order=2)
    g = _np(lnp.grad(rosen)(x))
    ref = numpy.zeros_like(x)
    ref[:-1] = -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    ref[1:] += 200 * (x[1:] - x[:-1] ** 2)
    numpy.testing.assert_allclose(g, ref, rtol=1e-12)
    H = _np(lnp.hessian(rosen)(x))
    numpy.testing.assert_allclose(H, H.T, atol=1e-9)
    assert H[0, 0] == pytest.approx(1200 * x[0] ** 2 - 400 * x[1] + 2)


def test_conv_layer_sliding_window():
    img = R.standard_normal((2, 7, 6))            # batch, H, W
    kern = R.standard_normal((3, 3, 4))           # kh, kw, out channels

    def conv(img, kern):
        win = lnp.lib.stride_tricks.sliding_window_view(img, (3, 3), axis=(1, 2))
        out = lnp.einsum("bhwij,ijc->bhwc", win, kern)
        return lnp.sum(lnp.maximum(out, 0.0) ** 2)

    check_grads(conv, img, kern)
    check_grads(lambda i, k: lnp.tanh(conv(i, k) * 0.01), img, kern, order=2)


def test_euler_ode_loop():
    def simulate(theta, y0):
        y = y0
        dt = 0.05
        for _ in range(40):
            dy = lnp.stack([y[1], -theta[0] * lnp.sin(y[0]) - theta[1] * y[1]])
            y = y + dt * dy
        return lnp.sum(y ** 2)

    check_grads(simulate, numpy.array([2.0, 0.3]), numpy.array([0.5, 0.0]), order=2)


def test_fill_preallocated_then_reduce():
    def f(x):
        out = lnp.zeros((5, x.shape[0]))
        acc = x
        for i in range(5):
            acc = lnp.sin(acc) + x * i
            out[i] = acc               # fill a preallocated array row by row
        out[:, 0] *= 2.0                # an in-place update through a view
        return lnp.sum(out ** 2) + lnp.max(out[-1])

    check_grads(f, R.uniform(-1, 1, 3), order=2)


def test_long_loop_with_bounded_flushes():
    """A loop long enough to trigger the pending-graph bound (mid-trace flushes)."""
    def f(x):
        y = x
        for _ in range(400):
            y = y + 0.001 * lnp.sin(y)
        return lnp.sum(y)

    check_grads(f, R.uniform(-1, 1, 4))

"""Transforms of functions of device arrays (Numba's simulator in CI): each gives the CPU's
values (never zeros) or raises naming what is missing."""
from __future__ import annotations

import _cuda_sim  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM before numba.cuda is imported)
import numpy as np
import pytest

import lazynp as lnp

X = np.array([0.5, -1.25, 2.0])
M = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])


def dev(x):
    return lnp.asarray(x, device="cuda")


def close(got, want):
    assert getattr(got, "device", None) == "cuda:0"
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)


def vec(a):
    return lnp.sin(a) * a + a ** 2


def scalar(a):
    return lnp.sum(lnp.sin(a) * a) + lnp.sum(a ** 3)


def test_jacobian_and_hessian_equal_the_cpu():
    close(lnp.jacobian(vec)(dev(X)), lnp.jacobian(vec)(lnp.asarray(X)))
    close(lnp.hessian(scalar)(dev(X)), lnp.hessian(scalar)(lnp.asarray(X)))


def test_jacobian_of_two_arguments_and_matrix_output():
    def f(w, x):
        return lnp.tanh(w @ x)
    want = lnp.jacobian(f, argnums=(0, 1))(lnp.asarray(M), lnp.asarray(X))
    got = lnp.jacobian(f, argnums=(0, 1))(dev(M), dev(X))
    assert got[0].shape == (2, 2, 3) and got[1].shape == (2, 3)
    close(got[0], want[0])
    close(got[1], want[1])


def test_vjp_and_elementwise_grad_equal_the_cpu():
    ct = np.array([1.0, -2.0, 0.5])
    out, fn = lnp.vjp(vec, dev(X))
    cout, cfn = lnp.vjp(vec, lnp.asarray(X))
    close(out, cout)
    close(fn(dev(ct))[0], cfn(lnp.asarray(ct))[0])
    close(fn(dev(ct))[0], cfn(lnp.asarray(ct))[0])        # (a second call: same values)
    close(lnp.elementwise_grad(vec)(dev(X)), lnp.elementwise_grad(vec)(lnp.asarray(X)))
    with pytest.raises(ValueError, match="cotangent has shape"):
        fn(dev(np.ones(2)))


def test_vjp_after_the_output_was_read():
    out, fn = lnp.vjp(vec, dev(X))
    np.asarray(out)                  # (the forward ran and dropped its graph)
    _, cfn = lnp.vjp(vec, lnp.asarray(X))
    close(fn(dev(np.ones(3)))[0], cfn(lnp.ones(3))[0])


def test_jvp_equals_the_cpu():
    t = np.array([0.3, 1.0, -0.7])
    out, tan = lnp.jvp(vec, (dev(X),), (dev(t),))
    cout, ctan = lnp.jvp(vec, (lnp.asarray(X),), (lnp.asarray(t),))
    close(out, cout)
    close(tan, ctan)


@pytest.mark.parametrize("name", ["std", "var"])
@pytest.mark.parametrize("kw", [{}, {"axis": 1}, {"axis": 0, "ddof": 1},
                                {"axis": 1, "keepdims": True}])
def test_grad_of_std_and_var(name, kw):
    def f(a):
        return lnp.sum(getattr(lnp, name)(a, **kw) * lnp.arange(1.0, 1.0 + (
            getattr(np, name)(M, **kw).size)).reshape(getattr(np, name)(M, **kw).shape))

    def f_dev(a):
        r = getattr(lnp, name)(a, **kw)
        w = lnp.asarray(np.arange(1.0, 1.0 + r.size).reshape(r.shape), device="cuda")
        return lnp.sum(r * w)
    close(lnp.grad(f_dev)(dev(M)), lnp.grad(f)(lnp.asarray(M)))


def test_grad_of_one_dimensional_matmul():
    v = np.array([1.0, 2.0])
    for f in (lambda a, b: lnp.sum(lnp.sin(a @ b)),):
        for (a, b) in ((X, X), (v, M), (M, X)):
            want = lnp.grad(f, argnums=(0, 1))(lnp.asarray(a), lnp.asarray(b))
            got = lnp.grad(f, argnums=(0, 1))(dev(a), dev(b))
            close(got[0], want[0])
            close(got[1], want[1])


def test_attach_grad_raises_naming_the_alternative():
    with pytest.raises(NotImplementedError, match="attach_grad"):
        dev(X).attach_grad()


def test_integer_inputs_raise_instead_of_zeros():
    with pytest.raises(TypeError, match="floating point"):
        lnp.jacobian(vec)(dev(np.arange(3)))


@pytest.mark.parametrize("fn, name", [(lambda a: lnp.sum(lnp.sort(a) * a), "sort"),
                                      (lambda a: lnp.sum(a[np.array([0, 2])]), "getitem"),
                                      (lambda a: lnp.sum(lnp.cumsum(a)), "cumsum")])
def test_functions_run_at_once_raise_under_grad_instead_of_zeros(fn, name):
    with pytest.raises(NotImplementedError, match=name):
        lnp.grad(fn)(dev(X))
    with pytest.raises(NotImplementedError, match=name):
        lnp.jacobian(fn)(dev(X))

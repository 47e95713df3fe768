"""custom_vjp, custom_jvp and autograd's primitive/defvjp against central finite differences:
first and second order, under jit(grad), under grad replay (repeated calls, changing
values), with nondiff arguments, pytrees, several outputs and NumPy code in the forward."""
from __future__ import annotations

import numpy
import pytest

import lazynp as lnp
from finite_differences import fd_grad
from lazynp.autograd import AutogradError, defvjp, primitive

EPS = 1e-6




def fd_jacobian(f, x, eps=EPS):
    x = numpy.array(x, dtype=numpy.float64)
    cols = []
    for i in numpy.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        cols.append((numpy.asarray(f(xp), float) - numpy.asarray(f(xm), float)) / (2 * eps))
    return numpy.stack(cols, axis=-1).reshape(numpy.shape(f(x)) + x.shape)


# --- a custom VJP with a deliberately different (but correct) formula ----------------------------

@lnp.custom_vjp
def softplus(x):
    return lnp.log1p(lnp.exp(x))


def _softplus_fwd(x):
    return softplus(x), x


def _softplus_bwd(x, g):
    return (g / (1.0 + lnp.exp(-x)),)


softplus.defvjp(_softplus_fwd, _softplus_bwd)

X = numpy.array([-1.3, 0.2, 0.7, 2.1])


def loss(x):
    return lnp.sum(softplus(x) * lnp.cos(x))


def test_custom_vjp_plain_call_is_the_function():
    numpy.testing.assert_allclose(numpy.asarray(softplus(X)), numpy.log1p(numpy.exp(X)))


def test_custom_vjp_first_order_matches_finite_differences():
    g = lnp.grad(loss)(X)
    numpy.testing.assert_allclose(g, fd_grad(loss, X), rtol=1e-6, atol=1e-8)


def test_custom_vjp_rule_is_used():
    """The rule, not the forward's ops, gives the gradient: a deliberately scaled rule
    shows up in the result."""
    @lnp.custom_vjp
    def f(x):
        return x * 1.0

    f.defvjp(lambda x: (f(x), None), lambda res, g: (3.0 * g,))
    numpy.testing.assert_allclose(lnp.grad(lambda x: lnp.sum(f(x)))(X), 3.0 * numpy.ones(4))


def test_custom_vjp_second_order_matches_finite_differences():
    h = lnp.hessian(loss)(X)
    ref = fd_jacobian(lambda x: lnp.grad(loss)(x), X)
    numpy.testing.assert_allclose(h, ref, rtol=1e-5, atol=1e-6)
    # grad of grad of a scalar function of one number
    f = lambda t: softplus(t) * t
    d2 = lnp.grad(lnp.grad(f))(0.4)
    ref2 = fd_grad(lambda t: lnp.grad(f)(float(t)), 0.4)
    numpy.testing.assert_allclose(d2, ref2, rtol=1e-5)


def test_custom_vjp_under_jit_grad():
    jg = lnp.jit(lnp.grad(loss))
    for shift in (0.0, 0.5, -1.0):
        numpy.testing.assert_allclose(numpy.asarray(jg(X + shift)),
                                      fd_grad(loss, X + shift), rtol=1e-6, atol=1e-8)


def test_custom_vjp_repeated_grad_calls_never_stale():
    """Replay keys the forward structure: a custom node must not replay a backward pass
    recorded for other values (or for another state of what the rule reads)."""
    scale = {"k": 1.0}

    @lnp.custom_vjp
    def f(x):
        return x * x

    f.defvjp(lambda x: (f(x), x), lambda x, g: (scale["k"] * 2.0 * g * x,))
    gf = lnp.grad(lambda x: lnp.sum(f(x)))
    for i in range(5):
        x = X + i
        numpy.testing.assert_allclose(gf(x), scale["k"] * 2.0 * x)
    scale["k"] = 5.0       # the rule changes: the next gradient follows it
    numpy.testing.assert_allclose(gf(X), 10.0 * X)
    g2 = lnp.grad(loss)
    for i in range(4):
        numpy.testing.assert_allclose(g2(X * (1 + i)), fd_grad(loss, X * (1 + i)),
                                      rtol=1e-6, atol=1e-8)


def test_custom_vjp_nondiff_argnums_pytrees_and_two_outputs():
    def fun(power, xs):
        a, b = xs["a"], xs["b"]
        return a ** power * b, lnp.sum(b)

    f = lnp.custom_vjp(fun, nondiff_argnums=(0,))

    def fwd(power, xs):
        return f(power, xs), xs

    def bwd(power, xs, g):
        ga, gb = g
        a, b = xs["a"], xs["b"]
        return ({"a": ga * power * a ** (power - 1) * b, "b": ga * a ** power + gb},)

    f.defvjp(fwd, bwd)

    def L(a, b):
        y, s = f(3, {"a": a, "b": b})
        return lnp.sum(lnp.sin(y)) + s ** 2

    a = numpy.array([0.5, -0.4, 1.1])
    b = numpy.array([1.5, 0.3, -0.7])
    ga, gb = lnp.grad(L, argnums=(0, 1))(a, b)
    numpy.testing.assert_allclose(ga, fd_grad(lambda t: L(t, b), a), rtol=1e-6)
    numpy.testing.assert_allclose(gb, fd_grad(lambda t: L(a, t), b), rtol=1e-6)


def test_custom_vjp_none_cotangent_is_zero_and_constants_pass():
    @lnp.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, g: (g * r[1], None))
    gx, gy = lnp.grad(lambda x, y: lnp.sum(f(x, y)), argnums=(0, 1))(X, X + 1)
    numpy.testing.assert_allclose(gx, X + 1)
    numpy.testing.assert_array_equal(gy, numpy.zeros(4))


def test_custom_vjp_errors_are_clear():
    @lnp.custom_vjp
    def f(x):
        return x * 2.0

    with pytest.raises(AttributeError, match="defvjp"):
        lnp.grad(lambda x: lnp.sum(f(x)))(X)
    f.defvjp(lambda x: (f(x), None), lambda r, g: g)          # not a tuple
    with pytest.raises(TypeError, match="tuple"):
        lnp.grad(lambda x: lnp.sum(f(x)))(X)
    f.defvjp(lambda x: f(x), lambda r, g: (g,))                # not a pair
    with pytest.raises(TypeError, match="pair"):
        lnp.grad(lambda x: lnp.sum(f(x)))(X)
    f.defvjp(lambda x: (f(x), None), lambda r, g: (lnp.ones(7),))
    with pytest.raises(ValueError, match="shape"):
        lnp.grad(lambda x: lnp.sum(f(x)))(X)


def test_custom_vjp_forward_may_use_numpy():
    """The forward runs on detached values: NumPy (or SciPy) code inside is allowed and the
    rule supplies the gradient."""
    @lnp.custom_vjp
    def ncdf(x):
        from math import erf
        v = numpy.asarray(x)
        return lnp.asarray(0.5 * (1.0 + numpy.vectorize(erf)(v / numpy.sqrt(2.0))))

    def fwd(x):
        return ncdf(x), x

    def bwd(x, g):
        return (g * lnp.exp(-0.5 * x * x) / numpy.sqrt(2 * numpy.pi),)

    ncdf.defvjp(fwd, bwd)
    L = lambda x: lnp.sum(ncdf(x) ** 2)
    numpy.testing.assert_allclose(lnp.grad(L)(X), fd_grad(L, X), rtol=1e-6, atol=1e-9)


def test_custom_vjp_vjp_jvp_and_record():
    out, pull = lnp.vjp(softplus, lnp.asarray(X))
    u = numpy.array([1.0, -2.0, 0.5, 3.0])
    numpy.testing.assert_allclose(numpy.asarray(pull(lnp.asarray(u))[0]),
                                  u / (1 + numpy.exp(-X)))
    _, t = lnp.jvp(softplus, (lnp.asarray(X),), (lnp.asarray(u),))
    numpy.testing.assert_allclose(numpy.asarray(t), u / (1 + numpy.exp(-X)))
    w = lnp.asarray(X)
    w.attach_grad()
    with lnp.autograd.record():
        y = lnp.sum(softplus(w) * lnp.cos(w))
    y.backward()
    numpy.testing.assert_allclose(numpy.asarray(w.grad), fd_grad(loss, X), rtol=1e-6)


# --- custom_jvp ------------------------------------------------------------------------------

@lnp.custom_jvp
def logaddexp0(x):
    return lnp.logaddexp(x, 0.0)


@logaddexp0.defjvp
def _logaddexp0_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return logaddexp0(x), t / (1.0 + lnp.exp(-x))


def test_custom_jvp_reverse_and_forward_mode():
    L = lambda x: lnp.sum(logaddexp0(x) * x)
    numpy.testing.assert_allclose(lnp.grad(L)(X), fd_grad(L, X), rtol=1e-6, atol=1e-8)
    v = numpy.array([0.3, -1.0, 2.0, 0.5])
    _, t = lnp.jvp(logaddexp0, (lnp.asarray(X),), (lnp.asarray(v),))
    numpy.testing.assert_allclose(numpy.asarray(t), v / (1 + numpy.exp(-X)))


def test_custom_jvp_second_order_and_jit():
    L = lambda x: lnp.sum(logaddexp0(x) * x)
    numpy.testing.assert_allclose(lnp.hessian(L)(X),
                                  fd_jacobian(lambda x: lnp.grad(L)(x), X), rtol=1e-5,
                                  atol=1e-6)
    numpy.testing.assert_allclose(numpy.asarray(lnp.jit(lnp.grad(L))(X)), fd_grad(L, X),
                                  rtol=1e-6, atol=1e-8)


def test_custom_jvp_two_arguments_and_nondiff():
    f = lnp.custom_jvp(lambda n, x, y: x ** n * y, nondiff_argnums=(0,))

    @f.defjvp
    def f_jvp(n, primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(n, x, y), n * x ** (n - 1) * y * tx + x ** n * ty

    L = lambda x, y: lnp.sum(lnp.sin(f(3, x, y)))
    gx, gy = lnp.grad(L, argnums=(0, 1))(X, X - 0.5)
    numpy.testing.assert_allclose(gx, fd_grad(lambda t: L(t, X - 0.5), X), rtol=1e-6)
    numpy.testing.assert_allclose(gy, fd_grad(lambda t: L(X, t), X - 0.5), rtol=1e-6)


# --- autograd's primitive + defvjp ----------------------------------------------------------------

@primitive
def logsumexp(x):
    m = numpy.max(numpy.asarray(x))        # NumPy inside a primitive, as in autograd
    return m + lnp.log(lnp.sum(lnp.exp(x - m)))


defvjp(logsumexp, lambda ans, x: lambda g: g * lnp.exp(x - ans))


def test_primitive_defvjp_first_and_second_order():
    L = lambda x: logsumexp(x) * 2.0 + lnp.sum(x ** 2)
    numpy.testing.assert_allclose(lnp.grad(L)(X), fd_grad(L, X), rtol=1e-6)
    numpy.testing.assert_allclose(lnp.hessian(L)(X),
                                  fd_jacobian(lambda x: lnp.grad(L)(x), X), rtol=1e-5,
                                  atol=1e-6)


def test_primitive_two_arguments_missing_rule_raises():
    @primitive
    def mul(x, y):
        return x * y

    defvjp(mul, lambda ans, x, y: lambda g: g * y)          # only argument 0
    numpy.testing.assert_allclose(lnp.grad(lambda x: lnp.sum(mul(x, X)))(X), X)
    with pytest.raises(AutogradError, match="argument 1"):
        lnp.grad(lambda y: lnp.sum(mul(X, y)))(X)
    mul.defvjp(lambda ans, x, y: lambda g: g * x, argnums=[1])
    numpy.testing.assert_allclose(lnp.grad(lambda y: lnp.sum(mul(X, y)))(X + 1), X)
    with pytest.raises(TypeError, match="primitive"):
        defvjp(lambda x: x, None)

"""Complex numbers with autograd's (and JAX's) convention: for a real ``L`` of complex ``z =
x + iy``, ``grad(L)(z) = dL/dx - i dL/dy``; a VJP with cotangent ``u`` is the gradient of
``Re(sum(u * f(z)))``.  Checked against finite differences along random complex directions
(``d/dt L(z + t v) = Re(sum(grad * v))``), first and second order."""
from __future__ import annotations

import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazynp as lnp

SET = settings(max_examples=6, deadline=None, derandomize=True, database=None,
               suppress_health_check=list(HealthCheck))


def _crandn(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _loss_np(f, z, u):
    return float(numpy.sum(numpy.real(u * numpy.asarray(f(lnp.asarray(z))))))


def check_complex(f, z, order=1, seed=0, eps=1e-6, rtol=1e-5):
    """``f``'s VJP at complex ``z`` against finite differences (and its own VJP for
    ``order=2``)."""
    rng = numpy.random.RandomState(seed)
    out = numpy.asarray(f(lnp.asarray(z)))
    u = _crandn(rng, out.shape) if out.dtype.kind == "c" else rng.standard_normal(out.shape)
    v = _crandn(rng, z.shape)
    fd = (_loss_np(f, z + eps * v, u) - _loss_np(f, z - eps * v, u)) / (2 * eps)
    _, fn = lnp.vjp(f, lnp.asarray(z))
    (g,) = fn(lnp.asarray(u))
    got = float(numpy.real(numpy.sum(numpy.asarray(g) * v)))
    assert abs(got - fd) <= rtol * max(1.0, abs(fd)) * 10, (got, fd)
    if order > 1:
        ucot = lnp.asarray(u)

        def vjp_fun(y):
            _, fn2 = lnp.vjp(f, y)
            return fn2(ucot)[0]
        check_complex(vjp_fun, z, order - 1, seed + 1, eps * 10, rtol * 10)


Z = _crandn(numpy.random.RandomState(3), (3,)) * 0.7
M = _crandn(numpy.random.RandomState(4), (3, 3))

ELEMENTWISE = {
    "exp": lnp.exp, "log": lnp.log, "sin": lnp.sin, "cos": lnp.cos, "tan": lnp.tan,
    "sqrt": lnp.sqrt, "square": lnp.square, "reciprocal": lnp.reciprocal, "tanh": lnp.tanh,
    "sinh": lnp.sinh, "cosh": lnp.cosh, "expm1": lnp.expm1, "log1p": lnp.log1p,
    "arctan": lnp.arctan, "arcsinh": lnp.arcsinh,
    "abs": lnp.abs, "real": lnp.real, "imag": lnp.imag, "conj": lnp.conj,
    "angle": lnp.angle, "real_attr": lambda z: z.real * z.imag,
    "mul": lambda z: z * (2.0 - 1.5j) * z, "div": lambda z: (1.0 + 2.0j) / z,
    "pow": lambda z: z ** 3, "mixed": lambda z: lnp.abs(z) * lnp.exp(1j * lnp.angle(z)),
    "sum_abs2": lambda z: lnp.sum(lnp.real(z * lnp.conj(z))),
    "cumsum": lnp.cumsum, "prod": lnp.prod, "mean": lnp.mean,
    "sort_real": lambda z: lnp.sort(lnp.real(z)) * lnp.imag(z),
    "where": lambda z: lnp.where(lnp.real(z) > 0, z * z, lnp.conj(z)),
    "norm": lnp.linalg.norm, "norm1": lambda z: lnp.linalg.norm(z, 1),
    "norm3": lambda z: lnp.linalg.norm(z, 3), "norminf": lambda z: lnp.linalg.norm(z, lnp.inf),
    "fft": lnp.fft.fft, "ifft": lambda z: lnp.fft.ifft(z, 5, norm="ortho"),
    "irfft": lambda z: lnp.fft.irfft(z, 4), "hfft": lnp.fft.hfft, "fftshift": lnp.fft.fftshift,
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_complex_elementwise_and_vector(name):
    check_complex(ELEMENTWISE[name], Z, order=2)


MATRIX = {
    "matmul": lambda a: a @ (a * (1 - 1j)),
    "dot": lambda a: lnp.dot(a, lnp.conj(a)),
    "einsum": lambda a: lnp.einsum("ij,jk->ik", a, lnp.exp(a)),
    "einsum_diag": lambda a: lnp.einsum("ii->i", a) * lnp.einsum("ij->j", a),
    "fro": lambda a: lnp.linalg.norm(a),
    "nuc": lambda a: lnp.linalg.norm(a, "nuc"),
    "ord2": lambda a: lnp.linalg.norm(a, 2),
    "ord1": lambda a: lnp.linalg.norm(a, 1),
    "svals": lambda a: lnp.linalg.svd(a, compute_uv=False),
    "inv": lnp.linalg.inv,
    "det": lnp.linalg.det,
    "solve": lambda a: lnp.linalg.solve(a, a[:, 0]),
    "eigvals": lnp.linalg.eigvals,
    "eigvalsh": lambda a: lnp.linalg.eigvalsh(a + lnp.conj(a.T)),
    "eigh_w": lambda a: lnp.linalg.eigh(a + lnp.conj(a.T))[0],
    "fft2": lnp.fft.fft2, "rfft_real_part": lambda a: lnp.fft.rfft(lnp.real(a)),
    "trace": lnp.trace, "kron": lambda a: lnp.kron(a, a[:2, :2]),
}


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_complex_matrix(name):
    check_complex(MATRIX[name], M, order=2)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
def test_complex_singular_values_second_order(shape):
    z = _crandn(numpy.random.RandomState(5), shape)
    check_complex(lambda a: lnp.linalg.norm(a, "nuc", axis=(-2, -1)), z, order=2)
    check_complex(lambda a: lnp.linalg.svd(a, compute_uv=False), z, order=2)


# --- eigenvectors and singular vectors of complex matrices: their phases are arbitrary, so
# functions that do not depend on them have a gradient (the gauge-fixed adjoints) and the
# others raise PhaseDependentGradient when the gradient is computed

def _svd_abs(a):
    u, s, vh = lnp.linalg.svd(a, full_matrices=False)
    return lnp.concatenate([lnp.ravel(lnp.abs(u)), lnp.ravel(s), lnp.ravel(lnp.abs(vh))])


def _svd_u_vh(a):
    u, _s, vh = lnp.linalg.svd(a, full_matrices=False)
    return lnp.matmul(u, vh)


def _eigh_projector(a):
    v = lnp.linalg.eigh(a, "U")[1][..., :2]
    return lnp.matmul(v, lnp.conj(lnp.swapaxes(v, -1, -2)))


def _eig_abs(a):
    w, v = lnp.linalg.eig(a)
    return lnp.concatenate([lnp.ravel(lnp.abs(v)), lnp.ravel(w)])


#: functions of eigen/singular vectors that do not depend on their phases (one
#: decomposition each: two calls' phases are two independent choices)
PHASE_FREE = {"svd abs(U), s, abs(Vh)": _svd_abs, "svd U Vh": _svd_u_vh,
              "eigh abs(v)": lambda a: lnp.abs(lnp.linalg.eigh(a)[1]),
              "eigh upper v v^H": _eigh_projector, "eig abs(v), w": _eig_abs}


@pytest.mark.parametrize("name", sorted(PHASE_FREE))
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 3)])
def test_phase_free_functions_of_complex_vectors(name, shape):
    if not name.startswith("svd") and shape[-1] != shape[-2]:
        pytest.skip("eig/eigh: square matrices")
    z = _crandn(numpy.random.RandomState(7), shape)
    check_complex(PHASE_FREE[name], z, order=1 if len(shape) > 2 else 2)


def test_eig_of_a_real_matrix_with_complex_eigenvectors():
    a = numpy.array([[0.0, -2.0, 0.3], [1.0, 0.1, 0.0], [0.2, 0.0, 0.5]])
    assert numpy.iscomplexobj(numpy.linalg.eig(a)[1])
    # (real perturbations only: a complex one may swap the order of the conjugate pair,
    # whose columns have equal abs values, between the two finite-difference points)
    f = lambda x: lnp.sum(lnp.abs(lnp.linalg.eig(x)[1]) * numpy.arange(9.0).reshape(3, 3))
    fn = lambda x: numpy.sum(numpy.abs(numpy.linalg.eig(x)[1]) * numpy.arange(9.0).reshape(3, 3))
    from finite_differences import fd_grad
    numpy.testing.assert_allclose(numpy.asarray(lnp.grad(f)(a)), fd_grad(fn, a), rtol=1e-5,
                                  atol=1e-8)


def test_phase_dependent_functions_raise():
    h = M + M.conj().T
    with pytest.raises(lnp.autograd.errors.PhaseDependentGradient, match="svd"):
        numpy.asarray(lnp.grad(lambda a: lnp.sum(lnp.real(lnp.linalg.svd(a)[0])))(M))
    with pytest.raises(lnp.autograd.errors.PhaseDependentGradient, match="svd"):
        numpy.asarray(lnp.grad(lambda a: lnp.sum(lnp.imag(lnp.linalg.svd(a)[2])))(M))
    with pytest.raises(lnp.autograd.AutogradError, match="eigh"):
        numpy.asarray(lnp.grad(lambda a: lnp.sum(lnp.real(lnp.linalg.eigh(a)[1][1])))(h))
    with pytest.raises(lnp.autograd.AutogradError, match="eig"):
        numpy.asarray(lnp.grad(lambda a: lnp.sum(lnp.imag(lnp.linalg.eig(a)[1][1])))(M))


def test_issue_examples_complex():
    assert complex(lnp.grad(lambda z: lnp.sum(lnp.real(z * z)))(1.1 + 1.2j)) == \
        pytest.approx(2.2 + 2.4j)
    assert complex(lnp.grad(lnp.abs)(1.1 + 1.2j)) == pytest.approx(0.676 - 0.737j, abs=1e-3)


def test_real_input_gets_a_real_gradient_through_complex_work():
    x = numpy.array([0.3, -0.7, 1.1])
    g = lnp.grad(lambda x: lnp.sum(lnp.abs(lnp.fft.fft(x)) ** 2))(x)
    assert numpy.asarray(g).dtype == numpy.float64
    numpy.testing.assert_allclose(numpy.asarray(g), 2 * 3 * x, rtol=1e-12)   # Parseval


@SET
@given(st.integers(1, 4), st.integers(1, 3), st.sampled_from([None, "ortho", "forward"]),
       st.integers(0, 2**16))
def test_complex_fftn_hypothesis(n0, n1, norm, seed):
    z = _crandn(numpy.random.RandomState(seed), (n0, n1 + 1))
    check_complex(lambda a: lnp.fft.fftn(a, norm=norm), z, order=2, seed=seed)
    check_complex(lambda a: lnp.fft.irfftn(a, norm=norm), z, order=1, seed=seed)


@SET
@given(st.integers(1, 3), st.integers(1, 4), st.integers(0, 2), st.sampled_from(
    ["sum", "cumsum", "norm", "einsum", "matmul", "abs2", "mean"]), st.integers(0, 2**16))
def test_complex_rules_hypothesis(rows, cols, axis, op, seed):
    """Shapes, axes and complex128 inputs drawn by hypothesis (first and second order)."""
    z = _crandn(numpy.random.RandomState(seed), (rows, cols))
    ax = axis % 2
    fns = {
        "sum": lambda a: lnp.sum(a * a, axis=ax),
        "cumsum": lambda a: lnp.cumsum(lnp.exp(a), axis=ax),
        "norm": lambda a: lnp.linalg.norm(a, axis=ax),
        "einsum": lambda a: lnp.einsum("ij,ij->i", a, lnp.conj(a)),
        "matmul": lambda a: a @ lnp.conj(a.T),
        "abs2": lambda a: lnp.abs(a) ** 2 * lnp.angle(a),
        "mean": lambda a: lnp.mean(lnp.sin(a), axis=ax, keepdims=True),
    }
    check_complex(fns[op], z, order=2, seed=seed)

"""Linear algebra written the way people write it from a textbook: Python loops over rows
and elements, with small NumPy operations (dot products of slices, row updates) inside.

Each program is ``program(np, *inputs)``: ``np`` is ``numpy`` or ``lazynp``; the inputs are
NumPy arrays (and Python numbers) made by the ``*_inputs(rng, ...)`` function next to it.
"""
from __future__ import annotations

import numpy as _numpy   # only to build inputs; the programs use the module they are given


# --- LU decomposition ------------------------------------------------------------------------

def lu_rows(np, A):
    """LU decomposition (Doolittle, no pivoting) row by row, one element at a time
    (scalar-loop: element reads/writes and dot products of row/column slices)."""
    A = np.asarray(A).copy()
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] = (A[i, j] - A[i, :j] @ A[:j, j]) / A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]
    return A


def lu_inputs(rng, n):
    """A diagonally dominant matrix (no pivoting needed, well conditioned)."""
    return (rng.random((n, n)) + n * _numpy.eye(n),)


# --- Cholesky ----------------------------------------------------------------------------------

def cholesky_rows(np, A):
    """Cholesky factor L (A = L L^T) computed by rows, element by element (scalar-loop)."""
    A = np.asarray(A)
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i):
            L[i, j] = (A[i, j] - L[i, :j] @ L[j, :j]) / L[j, j]
        L[i, i] = np.sqrt(A[i, i] - L[i, :i] @ L[i, :i])
    return L


def spd_inputs(rng, n):
    """A symmetric positive definite matrix M M^T + n I."""
    M = rng.random((n, n))
    return (M @ M.T + n * _numpy.eye(n),)


# --- Gram-Schmidt ------------------------------------------------------------------------------

def gram_schmidt(np, A):
    """Modified Gram-Schmidt QR over the columns: column slices, norms, element writes of R
    (linalg-loop)."""
    A = np.asarray(A).copy()
    m, n = A.shape
    Q = np.zeros((m, n))
    R = np.zeros((n, n))
    for k in range(n):
        R[k, k] = np.linalg.norm(A[:, k])
        Q[:, k] = A[:, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = Q[:, k] @ A[:, j]
            A[:, j] -= Q[:, k] * R[k, j]
    return Q, R


def tall_inputs(rng, m, n):
    """A random tall m x n matrix (well conditioned)."""
    return (rng.standard_normal((m, n)),)


# --- triangular solve --------------------------------------------------------------------------

def trisolv(np, L, b):
    """Forward substitution L x = b, one unknown per iteration (scalar-loop: an element write
    after a dot product of a row slice with the solved part)."""
    L = np.asarray(L)
    b = np.asarray(b)
    n = b.shape[0]
    x = np.zeros_like(b)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def trisolv_inputs(rng, n):
    """A lower-triangular matrix with a dominant diagonal, and a right-hand side."""
    L = _numpy.tril(rng.random((n, n))) / n + _numpy.eye(n)
    return L, rng.standard_normal(n)


# --- BLAS-3 kernels written by rows -------------------------------------------------------------

def trmm_rows(np, A, B, alpha):
    """B <- alpha * A^T B with A unit lower triangular, row by row in place (linalg-loop:
    vector-matrix products of trailing blocks)."""
    A = np.asarray(A)
    B = np.asarray(B).copy()
    m = B.shape[0]
    for i in range(m):
        B[i, :] += A[i + 1:, i] @ B[i + 1:, :]
        B[i, :] *= alpha
    return B


def trmm_inputs(rng, m, n):
    """A (m x m, only its strictly lower part is used), B (m x n), alpha."""
    return rng.random((m, m)) / m, rng.random((m, n)), 1.5


def syrk_rows(np, A, C, alpha, beta):
    """Symmetric rank-k update C <- alpha A A^T + beta C, lower triangle, row by row
    (linalg-loop)."""
    A = np.asarray(A)
    C = np.asarray(C).copy()
    n = C.shape[0]
    for i in range(n):
        C[i, :i + 1] *= beta
        C[i, :i + 1] += alpha * (A[:i + 1] @ A[i])
    return C


def syrk_inputs(rng, n, m):
    """A (n x m), C (n x n), alpha, beta."""
    return rng.random((n, m)), rng.random((n, n)), 1.5, 1.2


def syr2k_rows(np, A, B, C, alpha, beta):
    """Symmetric rank-2k update C <- alpha (A B^T + B A^T) + beta C, lower triangle, by rows
    (linalg-loop)."""
    A = np.asarray(A)
    B = np.asarray(B)
    C = np.asarray(C).copy()
    n = C.shape[0]
    for i in range(n):
        C[i, :i + 1] *= beta
        C[i, :i + 1] += alpha * (A[:i + 1] @ B[i] + B[:i + 1] @ A[i])
    return C


def syr2k_inputs(rng, n, m):
    """A, B (n x m), C (n x n), alpha, beta."""
    return rng.random((n, m)), rng.random((n, m)), rng.random((n, n)), 1.5, 1.2


def symm_rows(np, A, B, C, alpha, beta):
    """C <- alpha A B + beta C with A symmetric, reading only A's lower triangle, by rows
    (linalg-loop: outer-product updates of the rows above, a row dot)."""
    A = np.asarray(A)
    B = np.asarray(B)
    C = np.asarray(C).copy()
    m = C.shape[0]
    for i in range(m):
        temp2 = A[i, :i] @ B[:i, :]
        C[:i, :] += alpha * np.outer(A[i, :i], B[i, :])
        C[i, :] = beta * C[i, :] + alpha * A[i, i] * B[i, :] + alpha * temp2
    return C


def symm_inputs(rng, m, n):
    """A (m x m, lower triangle used), B, C (m x n), alpha, beta."""
    return rng.random((m, m)), rng.random((m, n)), rng.random((m, n)), 1.5, 1.2


# --- Durbin / Levinson ---------------------------------------------------------------------------

def durbin(np, r):
    """Levinson-Durbin recursion for the Yule-Walker equations: scalar recurrences mixed with
    reversed-slice dot products and slice updates (linalg-loop)."""
    r = np.asarray(r)
    n = r.shape[0]
    y = np.zeros_like(r)
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, n):
        beta = (1.0 - alpha * alpha) * beta
        alpha = -(r[k] + r[k - 1::-1] @ y[:k]) / beta
        y[:k] = y[:k] + alpha * y[k - 1::-1]
        y[k] = alpha
    return y


def durbin_inputs(rng, n):
    """Normalized autocorrelations of an AR(1)-like signal (a positive definite Toeplitz
    system, so the recursion is stable)."""
    x = rng.standard_normal(4 * n)
    x = _numpy.convolve(x, [1.0, 0.6, 0.3], mode="same")
    f = _numpy.fft.rfft(x, 8 * n)
    acf = _numpy.fft.irfft(f * f.conj())[: n + 1]
    return (acf[1:] / acf[0],)


# --- Floyd-Warshall ------------------------------------------------------------------------------

def floyd_warshall(np, W):
    """All-pairs shortest paths: a Python loop over the pivot with a broadcast minimum over the
    whole matrix (linalg-loop)."""
    dist = np.asarray(W).copy()
    n = dist.shape[0]
    for k in range(n):
        dist = np.minimum(dist, dist[:, k:k + 1] + dist[k:k + 1, :])
    return dist


def floyd_inputs(rng, n):
    """Random positive edge weights, a sparse-ish graph (missing edges are inf)."""
    W = rng.random((n, n)) * 10.0
    W[rng.random((n, n)) < 0.7] = _numpy.inf
    _numpy.fill_diagonal(W, 0.0)
    return (W,)

"""Programs whose inner loop reads and writes single elements: iterative solvers written
element by element, dynamic programming over a table, bit-level loops over bytes, sparse
row loops.

Each program is ``program(np, *inputs)``; the inputs come from the ``*_inputs(rng, ...)``
function next to it.
"""
from __future__ import annotations

import numpy as _numpy   # only to build inputs; the programs use the module they are given


# --- Gauss-Seidel --------------------------------------------------------------------------------

def gauss_seidel(np, A, b, sweeps):
    """Gauss-Seidel sweeps for A x = b: one unknown per step, updated from row dot products
    with the newest values (scalar-loop)."""
    A = np.asarray(A)
    b = np.asarray(b)
    n = b.shape[0]
    x = np.zeros_like(b)
    for _ in range(sweeps):
        for i in range(n):
            s = A[i, :i] @ x[:i] + A[i, i + 1:] @ x[i + 1:]
            x[i] = (b[i] - s) / A[i, i]
    return x


def gauss_seidel_inputs(rng, n, sweeps):
    """A strictly diagonally dominant system (the sweeps converge)."""
    A = rng.random((n, n)) + n * _numpy.eye(n)
    return A, rng.standard_normal(n), sweeps


def seidel_2d(np, A, steps):
    """2-D Gauss-Seidel smoothing (9-point average), updated in place element by element
    (scalar-loop: nine element reads and one element write per point)."""
    A = np.asarray(A).copy()
    n, m = A.shape
    for _ in range(steps):
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0
    return A


def grid_inputs(rng, n, steps):
    """A random n x n grid and a step count."""
    return rng.random((n, n)), steps


# --- dynamic programming -------------------------------------------------------------------------

def nussinov(np, seq):
    """Nussinov RNA folding: maximum base pairs by DP over an upper-triangular table,
    element by element (scalar-loop; the split over k is a vectorized max of two slices)."""
    seq = np.asarray(seq)
    n = seq.shape[0]
    table = np.zeros((n, n), dtype=np.int32)
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < n:
                table[i, j] = max(table[i, j], table[i + 1, j])
                if i < j - 1:
                    pair = 1 if seq[i] + seq[j] == 3 else 0
                    table[i, j] = max(table[i, j], table[i + 1, j - 1] + pair)
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            if j - i > 1:
                table[i, j] = max(table[i, j], (table[i, i + 1:j] + table[i + 2:j + 1, j]).max())
    return table


def rna_inputs(rng, n):
    """A random RNA sequence coded 0..3 (A, C, G, U: complementary codes sum to 3)."""
    return (rng.integers(0, 4, size=n, dtype=_numpy.int32),)


def edit_distance(np, a, b):
    """Levenshtein distance by the classic DP table filled element by element (scalar-loop,
    integer table)."""
    a = np.asarray(a)
    b = np.asarray(b)
    m, n = a.shape[0], b.shape[0]
    D = np.zeros((m + 1, n + 1), dtype=np.int64)
    D[:, 0] = np.arange(m + 1)
    D[0, :] = np.arange(n + 1)
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1, D[i - 1, j - 1] + cost)
    return D[m, n], D[m]


def strings_inputs(rng, m, n):
    """Two random strings over a 4-letter alphabet, as uint8 codes."""
    return (rng.integers(0, 4, size=m, dtype=_numpy.uint8),
            rng.integers(0, 4, size=n, dtype=_numpy.uint8))


# --- CRC-16 -----------------------------------------------------------------------------------------

def crc16_bitwise(np, packets):
    """CRC-16/CCITT of each packet, bit by bit: ``for b in data`` over a uint8 array with
    Python integer bit operations (scalar-loop)."""
    packets = np.asarray(packets)
    crcs = np.zeros(packets.shape[0], dtype=np.uint16)
    for p, data in enumerate(packets):
        crc = 0xFFFF
        for b in data:
            crc ^= int(b) << 8
            for _ in range(8):
                if crc & 0x8000:
                    crc = ((crc << 1) ^ 0x1021) & 0xFFFF
                else:
                    crc = (crc << 1) & 0xFFFF
        crcs[p] = crc
    return crcs


def crc16_table(np, data):
    """Table-driven CRC-16/CCITT: the 256-entry table built with whole-array bit operations,
    then ``for b in data`` with NumPy uint16 scalars and a table lookup per byte
    (scalar-loop)."""
    data = np.asarray(data)
    table = np.arange(256, dtype=np.uint16) << 8
    for _ in range(8):
        table = np.where(table & 0x8000, (table << 1) ^ 0x1021, table << 1).astype(np.uint16)
    crc = np.uint16(0xFFFF)
    for b in data:
        crc = (crc << 8) ^ table[(crc >> 8) ^ b]
    return crc, table


def bytes_inputs(rng, n):
    """n random bytes."""
    return (rng.integers(0, 256, size=n, dtype=_numpy.uint8),)


def packets_inputs(rng, packets, length):
    """``packets`` random packets of ``length`` bytes."""
    return (rng.integers(0, 256, size=(packets, length), dtype=_numpy.uint8),)


# --- CSR sparse matrix-vector product ---------------------------------------------------------------

def csr_power_iteration(np, data, indices, indptr, x0, iters):
    """Power iteration with a hand-written CSR mat-vec: a Python loop over rows, element reads
    of indptr, slices and fancy indexing of x (scalar-loop)."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    indptr = np.asarray(indptr)
    x = np.asarray(x0)
    n = indptr.shape[0] - 1
    x = x / np.linalg.norm(x)
    lam = 0.0
    for _ in range(iters):
        y = np.empty(n)
        for i in range(n):
            start, end = indptr[i], indptr[i + 1]
            y[i] = data[start:end] @ x[indices[start:end]]
        lam = x @ y
        x = y / np.linalg.norm(y)
    return x, lam


def csr_inputs(rng, n, per_row, iters):
    """A random sparse non-negative n x n matrix in CSR form (``per_row`` entries per row on
    average, at least one), a start vector and an iteration count."""
    counts = rng.integers(1, 2 * per_row, size=n)
    indptr = _numpy.concatenate(([0], _numpy.cumsum(counts))).astype(_numpy.int64)
    indices = _numpy.concatenate([_numpy.sort(rng.choice(n, size=c, replace=False))
                                  for c in counts]).astype(_numpy.int64)
    data = rng.random(indptr[-1]) + 0.1
    return data, indices, indptr, rng.random(n) + 0.5, iters

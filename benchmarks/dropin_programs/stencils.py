"""Whole-array programs on grids: stencils written with slices, finite-difference
Navier-Stokes, a recursive edge filter, the game of life.

Each program is ``program(np, *inputs)``; the inputs come from the ``*_inputs(rng, ...)``
function next to it.
"""
from __future__ import annotations

import numpy as _numpy   # only to build inputs; the programs use the module they are given


# --- Jacobi ------------------------------------------------------------------------------------------

def jacobi_1d(np, A, steps):
    """1-D Jacobi: two arrays updated alternately through shifted slices (stencil)."""
    A = np.asarray(A).copy()
    B = A.copy()
    for _ in range(steps):
        B[1:-1] = (A[:-2] + A[1:-1] + A[2:]) / 3.0
        A[1:-1] = (B[:-2] + B[1:-1] + B[2:]) / 3.0
    return A


def vector_inputs(rng, n, steps):
    """A random vector of n values and a step count."""
    return rng.random(n), steps


def jacobi_2d(np, A, steps):
    """2-D Jacobi, 5-point average, ping-pong between two grids through slices (stencil)."""
    A = np.asarray(A).copy()
    B = A.copy()
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                               + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                               + B[:-2, 1:-1])
    return A


def grid_inputs(rng, n, steps):
    """A random n x n grid and a step count."""
    return rng.random((n, n)), steps


# --- FDTD --------------------------------------------------------------------------------------------

def fdtd_2d(np, ex, ey, hz, source):
    """2-D finite-difference time-domain (Yee scheme): three fields updated in place through
    shifted slices, a source row each step (stencil)."""
    ex = np.asarray(ex).copy()
    ey = np.asarray(ey).copy()
    hz = np.asarray(hz).copy()
    source = np.asarray(source)
    for t in range(source.shape[0]):
        ey[0, :] = source[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return ex, ey, hz


def fdtd_inputs(rng, nx, ny, steps):
    """Random initial fields and a source value per step."""
    return (rng.random((nx, ny)), rng.random((nx, ny)), rng.random((nx, ny)),
            _numpy.sin(_numpy.arange(steps) * 0.3))


# --- heat 3-D ----------------------------------------------------------------------------------------

def heat_3d(np, A, steps):
    """3-D heat equation, explicit 7-point stencil, two grids (stencil)."""
    A = np.asarray(A).copy()
    B = A.copy()
    c = 0.125
    for _ in range(steps):
        for src, dst in ((A, B), (B, A)):
            mid = src[1:-1, 1:-1, 1:-1]
            dst[1:-1, 1:-1, 1:-1] = (
                c * (src[2:, 1:-1, 1:-1] - 2.0 * mid + src[:-2, 1:-1, 1:-1])
                + c * (src[1:-1, 2:, 1:-1] - 2.0 * mid + src[1:-1, :-2, 1:-1])
                + c * (src[1:-1, 1:-1, 2:] - 2.0 * mid + src[1:-1, 1:-1, :-2])
                + mid)
    return A


def cube_inputs(rng, n, steps):
    """A random n^3 grid and a step count."""
    return rng.random((n, n, n)), steps


# --- Navier-Stokes: lid-driven cavity ----------------------------------------------------------------

def cavity_flow(np, u, v, p, nt, nit):
    """Lid-driven cavity flow (incompressible Navier-Stokes, finite differences): a pressure
    Poisson loop with boundary conditions, then momentum updates, all through slices
    (stencil)."""
    u = np.asarray(u).copy()
    v = np.asarray(v).copy()
    p = np.asarray(p).copy()
    ny, nx = u.shape
    dx, dy = 2.0 / (nx - 1), 2.0 / (ny - 1)
    rho, nu, dt = 1.0, 0.1, 0.0005
    for _ in range(nt):
        # right-hand side of the pressure equation
        dudx = (u[1:-1, 2:] - u[1:-1, :-2]) / (2.0 * dx)
        dvdy = (v[2:, 1:-1] - v[:-2, 1:-1]) / (2.0 * dy)
        dudy = (u[2:, 1:-1] - u[:-2, 1:-1]) / (2.0 * dy)
        dvdx = (v[1:-1, 2:] - v[1:-1, :-2]) / (2.0 * dx)
        rhs = np.zeros_like(p)
        rhs[1:-1, 1:-1] = rho * ((dudx + dvdy) / dt - dudx ** 2 - 2.0 * dudy * dvdx - dvdy ** 2)
        for _ in range(nit):
            pn = p.copy()
            p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, :-2]) * dy ** 2
                              + (pn[2:, 1:-1] + pn[:-2, 1:-1]) * dx ** 2
                              - rhs[1:-1, 1:-1] * dx ** 2 * dy ** 2)
                             / (2.0 * (dx ** 2 + dy ** 2)))
            p[:, -1] = p[:, -2]
            p[0, :] = p[1, :]
            p[:, 0] = p[:, 1]
            p[-1, :] = 0.0
        un = u.copy()
        vn = v.copy()
        c = un[1:-1, 1:-1]
        u[1:-1, 1:-1] = (c - c * dt / dx * (c - un[1:-1, :-2])
                         - vn[1:-1, 1:-1] * dt / dy * (c - un[:-2, 1:-1])
                         - dt / (2.0 * rho * dx) * (p[1:-1, 2:] - p[1:-1, :-2])
                         + nu * (dt / dx ** 2 * (un[1:-1, 2:] - 2.0 * c + un[1:-1, :-2])
                                 + dt / dy ** 2 * (un[2:, 1:-1] - 2.0 * c + un[:-2, 1:-1])))
        c = vn[1:-1, 1:-1]
        v[1:-1, 1:-1] = (c - un[1:-1, 1:-1] * dt / dx * (c - vn[1:-1, :-2])
                         - c * dt / dy * (c - vn[:-2, 1:-1])
                         - dt / (2.0 * rho * dy) * (p[2:, 1:-1] - p[:-2, 1:-1])
                         + nu * (dt / dx ** 2 * (vn[1:-1, 2:] - 2.0 * c + vn[1:-1, :-2])
                                 + dt / dy ** 2 * (vn[2:, 1:-1] - 2.0 * c + vn[:-2, 1:-1])))
        u[0, :] = 0.0
        u[:, 0] = 0.0
        u[:, -1] = 0.0
        u[-1, :] = 1.0          # the moving lid
        v[0, :] = 0.0
        v[-1, :] = 0.0
        v[:, 0] = 0.0
        v[:, -1] = 0.0
    return u, v, p


def flow_inputs(rng, n, nt, nit):
    """Zero velocity and pressure fields on an n x n grid, plus step counts."""
    return _numpy.zeros((n, n)), _numpy.zeros((n, n)), _numpy.zeros((n, n)), nt, nit


# --- Navier-Stokes: channel flow (periodic in x) -----------------------------------------------------

def channel_flow(np, u, v, p, nt, nit):
    """Channel flow driven by a body force, periodic in x (``np.roll``), walls in y; the
    relative change of the flow is monitored every step, as convergence checks do
    (stencil)."""
    u = np.asarray(u).copy()
    v = np.asarray(v).copy()
    p = np.asarray(p).copy()
    ny, nx = u.shape
    dx, dy = 2.0 / (nx - 1), 2.0 / (ny - 1)
    rho, nu, force, dt = 1.0, 0.1, 1.0, 0.0005

    def ddx(f):
        return (np.roll(f, -1, axis=1) - np.roll(f, 1, axis=1)) / (2.0 * dx)

    def ddy(f):
        return (np.roll(f, -1, axis=0) - np.roll(f, 1, axis=0)) / (2.0 * dy)

    history = []
    for _ in range(nt):
        un, vn = u.copy(), v.copy()
        dudx, dudy, dvdx, dvdy = ddx(un), ddy(un), ddx(vn), ddy(vn)
        rhs = rho * ((dudx + dvdy) / dt - dudx ** 2 - 2.0 * dudy * dvdx - dvdy ** 2)
        for _ in range(nit):
            pn = p.copy()
            p = (((np.roll(pn, -1, axis=1) + np.roll(pn, 1, axis=1)) * dy ** 2
                  + (np.roll(pn, -1, axis=0) + np.roll(pn, 1, axis=0)) * dx ** 2
                  - rhs * dx ** 2 * dy ** 2) / (2.0 * (dx ** 2 + dy ** 2)))
            p[0, :] = p[1, :]
            p[-1, :] = p[-2, :]
        lap_u = ((np.roll(un, -1, 1) - 2.0 * un + np.roll(un, 1, 1)) / dx ** 2
                 + (np.roll(un, -1, 0) - 2.0 * un + np.roll(un, 1, 0)) / dy ** 2)
        lap_v = ((np.roll(vn, -1, 1) - 2.0 * vn + np.roll(vn, 1, 1)) / dx ** 2
                 + (np.roll(vn, -1, 0) - 2.0 * vn + np.roll(vn, 1, 0)) / dy ** 2)
        u = un - dt * (un * dudx + vn * dudy) - dt / rho * ddx(p) + nu * dt * lap_u + force * dt
        v = vn - dt * (un * dvdx + vn * dvdy) - dt / rho * ddy(p) + nu * dt * lap_v
        u[0, :] = 0.0
        u[-1, :] = 0.0
        v[0, :] = 0.0
        v[-1, :] = 0.0
        history.append((np.sum(u) - np.sum(un)) / np.sum(u))
    return u, v, p, np.array(history)


def channel_inputs(rng, n, nt, nit):
    """A parabolic start profile with a little noise, zero v and p, step counts."""
    y = _numpy.linspace(-1.0, 1.0, n)[:, None]
    u = (1.0 - y ** 2) * _numpy.ones((n, n)) + 0.01 * rng.standard_normal((n, n))
    u[0, :] = u[-1, :] = 0.0
    return u, _numpy.zeros((n, n)), _numpy.zeros((n, n)), nt, nit


# --- Deriche edge filter -------------------------------------------------------------------------------

def deriche(np, img, alpha):
    """Deriche recursive edge filter: causal and anti-causal passes along rows then columns,
    each a Python loop over one axis with whole-column (row) updates (stencil)."""
    img = np.asarray(img)
    h, w = img.shape
    e1 = np.exp(-alpha)
    e2 = np.exp(-2.0 * alpha)
    k = (1.0 - e1) ** 2 / (1.0 + 2.0 * alpha * e1 - e2)
    a1 = a5 = k
    a2 = a6 = k * e1 * (alpha - 1.0)
    a3 = a7 = k * e1 * (alpha + 1.0)
    a4 = a8 = -k * e2
    b1 = 2.0 ** -alpha
    b2 = -e2

    def recursive_pass(x, c0, c1, c2, c3):
        """y = causal(c0, c1) + anti-causal(c2, c3) filter along axis 1 of x."""
        rows, cols = x.shape
        y1 = np.empty_like(x)
        xm1 = np.zeros(rows)
        ym1 = np.zeros(rows)
        ym2 = np.zeros(rows)
        for j in range(cols):
            y1[:, j] = c0 * x[:, j] + c1 * xm1 + b1 * ym1 + b2 * ym2
            xm1 = x[:, j]
            ym2 = ym1
            ym1 = y1[:, j]
        y2 = np.empty_like(x)
        xp1 = np.zeros(rows)
        xp2 = np.zeros(rows)
        yp1 = np.zeros(rows)
        yp2 = np.zeros(rows)
        for j in range(cols - 1, -1, -1):
            y2[:, j] = c2 * xp1 + c3 * xp2 + b1 * yp1 + b2 * yp2
            xp2 = xp1
            xp1 = x[:, j]
            yp2 = yp1
            yp1 = y2[:, j]
        return y1 + y2

    horizontal = recursive_pass(img, a1, a2, a3, a4)
    out = recursive_pass(horizontal.T, a5, a6, a7, a8).T
    return out


def image_inputs(rng, h, w):
    """A random grey image and the filter's alpha."""
    return rng.random((h, w)), 0.25


# --- game of life ------------------------------------------------------------------------------------------

def game_of_life(np, board, steps):
    """Conway's game of life: neighbour counts from eight shifted slices, boolean masks for
    births and survivals, a masked write through a view (stencil)."""
    Z = np.asarray(board).astype(np.int8)
    for _ in range(steps):
        N = (Z[:-2, :-2] + Z[:-2, 1:-1] + Z[:-2, 2:]
             + Z[1:-1, :-2] + Z[1:-1, 2:]
             + Z[2:, :-2] + Z[2:, 1:-1] + Z[2:, 2:])
        inner = Z[1:-1, 1:-1]
        alive = inner == 1
        birth = (N == 3) & ~alive
        survive = ((N == 2) | (N == 3)) & alive
        inner[...] = 0
        inner[birth | survive] = 1
    return Z, Z.sum()


def board_inputs(rng, n, steps):
    """A random board (30% alive, dead border) and a step count."""
    b = rng.random((n, n)) < 0.3
    b[0, :] = b[-1, :] = b[:, 0] = b[:, -1] = False
    return b, steps

"""HIPS autograd's own gradient tests run against lazynp (issue 35's acceptance).

Usage::

    python benchmarks/autograd_tests.py [AUTOGRAD_CHECKOUT] [-k EXPR] [--list-failures]

``AUTOGRAD_CHECKOUT`` is a clone of https://github.com/HIPS/autograd (default
``$AUTOGRAD_SRC`` or ``/work/vendor/autograd``); nothing of it is copied into this
repository.  Its ``tests/`` folder is copied to a temporary folder with the imports rewritten:

* ``autograd.numpy`` -> ``lazynp``, ``autograd.numpy.random`` -> ``lazynp.random``
  (``autograd.numpy.linalg``/``fft`` -> lazynp's);
* ``from autograd import grad, jacobian, ...`` and ``autograd.extend``/``tracer``'s
  ``primitive``/``defvjp`` -> lazynp's (through a small shim module written here, whose only
  definitions of its own are the containers ``list``/``tuple``/``dict``/``isinstance``,
  which lazynp takes as plain Python pytrees, and ``deriv``/``holomorphic_grad``/
  ``grad_and_aux``/``checkpoint``/``make_ggnvp``, a few lines each over lazynp's
  ``jvp``/``grad``/``make_vjp``);
* ``autograd.misc`` (``flatten``, ``const_graph``) -> :mod:`lazynp.autograd.misc`;
* ``autograd.test_util`` -> a ``check_grads``/``combo_check`` that compare lazynp's
  ``make_vjp``/``make_jvp`` with finite differences, as autograd's do (autograd's
  ``vspace`` is used only for random directions and inner products of NumPy values).

Test files that test autograd's internals rather than gradients of NumPy code are left out:
``test_core.py`` (no NumPy), ``test_vspaces.py``, ``test_tests.py`` (autograd's ``vspace``
and ``test_util``), ``test_scipy.py`` (``autograd.scipy``: lazynp has no SciPy namespace).
Prints one line per failing test with the first line of its error and the totals.

``test_scipy.py``'s 90 tests stay out: they differentiate ``autograd.scipy`` (``special``,
``stats``, ``signal``, ``integrate``, ``scipy.linalg``), and lazynp has no SciPy namespace
with gradient rules.  The xarray tests of ``test_ufunc_dispatch.py`` skip without xarray.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

LEFT_OUT = ("test_core.py", "test_vspaces.py", "test_tests.py", "test_scipy.py",
            "test_performance.py", "_test_complexity.py", "profiling.py")

SHIM = '''\
"""autograd's API names for lazynp's (written by benchmarks/autograd_tests.py)."""
import builtins
import lazynp
from lazynp import (grad, value_and_grad, jacobian, hessian, elementwise_grad, make_vjp,
                    make_jvp, make_hvp, hessian_vector_product)
from lazynp.autograd import (hessian_tensor_product, tensor_jacobian_product,
                             vector_jacobian_product, primitive, defvjp, stop_gradient)

list, tuple, dict, isinstance = builtins.list, builtins.tuple, builtins.dict, builtins.isinstance


def deriv(fun, argnum=0):
    def d(*args):
        x = args[argnum]
        f = lambda v: fun(*args[:argnum], v, *args[argnum + 1:])
        return lazynp.jvp(f, (x,), (lazynp.ones_like(lazynp.asarray(x)),))[1]
    return d


def holomorphic_grad(fun, argnum=0):
    return grad(lambda *a: lazynp.real(fun(*a)), argnum)


def grad_and_aux(fun, argnum=0):
    return grad(fun, argnum, has_aux=True)


def checkpoint(fun):
    return fun


def make_ggnvp(f, g=lambda x: 0.5 * lazynp.sum(x ** 2, axis=-1), f_argnum=0):
    def maker(*args):
        f_vjp, f_x = lazynp.make_vjp(f, f_argnum)(*args)
        g_hvp, grad_g_x = lazynp.make_vjp(grad(g))(f_x)
        f_jvp, _ = lazynp.make_vjp(f_vjp)(lazynp.zeros_like(grad_g_x))
        return lambda v: f_vjp(g_hvp(f_jvp(v)))
    return maker
'''

TEST_UTIL = '''\
"""check_grads/combo_check over lazynp's make_vjp/make_jvp (benchmarks/autograd_tests.py)."""
from itertools import product

import numpy

import lazynp
from autograd.core import vspace as _vspace

TOL = RTOL = 1e-6
EPS = 1e-6


def _plain(x):
    if isinstance(x, lazynp.ndarray):
        v = numpy.asarray(x)
        return v[()] if v.ndim == 0 else v
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def vspace(x):
    return _vspace(_plain(x))


def scalar_close(a, b):
    a, b = _plain(a), _plain(b)
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def _unary(f, argnum, args, kwargs):
    def g(x):
        a = list(args)
        if isinstance(argnum, int):
            a[argnum] = x
        else:
            for k, v in zip(argnum, x):
                a[k] = v
        return f(*a, **kwargs)
    x = args[argnum] if isinstance(argnum, int) else tuple(args[k] for k in argnum)
    return g, x


def make_numerical_jvp(f, x):
    y = _plain(f(x))
    x_vs, y_vs = vspace(x), vspace(y)
    x = _plain(x)

    def jvp(v):
        fp = _plain(f(x_vs.add(x, x_vs.scalar_mul(v, EPS / 2))))
        fm = _plain(f(x_vs.add(x, x_vs.scalar_mul(v, -EPS / 2))))
        return y_vs.scalar_mul(y_vs.add(fp, y_vs.scalar_mul(fm, -1.0)), 1.0 / EPS)
    return jvp


def _vjp(f, x):
    return lazynp.make_vjp(f)(x)


def _jvp(f, x):
    return lazynp.make_jvp(f)(x)


def check_vjp(f, x):
    vjp, y = _vjp(f, x)
    jvp = make_numerical_jvp(f, x)
    x_vs, y_vs = vspace(x), vspace(y)
    x_v, y_v = x_vs.randn(), y_vs.randn()
    vjp_y = x_vs.covector(_plain(vjp(y_vs.covector(y_v))))
    assert vspace(vjp_y) == x_vs, f"VSpace mismatch: {vspace(vjp_y)} vs {x_vs}"
    exact = x_vs.inner_prod(x_v, vjp_y)
    numeric = y_vs.inner_prod(y_v, jvp(x_v))
    assert scalar_close(numeric, exact), f"VJP check failed: analytic {exact}, numeric {numeric}"


def check_jvp(f, x):
    x_v = vspace(x).randn()
    check_equivalent(_plain(_jvp(f, x)(x_v)[1]), make_numerical_jvp(f, x)(x_v))


def check_equivalent(x, y):
    x, y = _plain(x), _plain(y)
    x_vs, y_vs = vspace(x), vspace(y)
    assert x_vs == y_vs, f"VSpace mismatch:\\nx: {x_vs}\\ny: {y_vs}"
    v = x_vs.randn()
    assert scalar_close(x_vs.inner_prod(x, v), x_vs.inner_prod(y, v)), \\
        f"Value mismatch:\\nx: {x}\\ny: {y}"


def check_grads(f, argnum=0, modes=None, order=2):
    def checker(*args, **kwargs):
        g, x = _unary(f, argnum, args, kwargs)
        _check(g, x, modes or ["fwd", "rev"], order)
    return checker


def _check(f, x, modes, order):
    if "fwd" in modes:
        check_jvp(f, x)
        if order > 1:
            grad_f = lambda x, v: _jvp(f, x)(v)[1]
            v = vspace(x).randn()
            check_grads(grad_f, (0, 1), modes, order=order - 1)(x, v)
    if "rev" in modes:
        check_vjp(f, x)
        if order > 1:
            grad_f = lambda x, v: _vjp(f, x)[0](v)
            v = vspace(_plain(f(x))).randn()
            check_grads(grad_f, (0, 1), modes, order=order - 1)(x, v)


def combo_check(fun, *args, **kwargs):
    _check_grads = lambda f: check_grads(f, *args, **kwargs)

    def _combo_check(*args, **kwargs):
        kwarg_key_vals = [[(k, x) for x in xs] for k, xs in kwargs.items()]
        for _args in product(*args):
            for _kwargs in product(*kwarg_key_vals):
                _check_grads(fun)(*_args, **dict(_kwargs))
    return _combo_check
'''

REWRITES = [
    (r"^import autograd\.numpy\.random as (\w+)", r"import lazynp.random as \1"),
    (r"^import autograd\.numpy\.linalg as (\w+)", r"import lazynp.linalg as \1"),
    (r"^import autograd\.numpy\.fft as (\w+)", r"import lazynp.fft as \1"),
    (r"^import autograd\.numpy as (\w+)", r"import lazynp as \1"),
    (r"^from autograd\.test_util import", "from _lazynp_test_util import"),
    (r"^from autograd\.(extend|tracer) import primitive", "from _lazynp_autograd import primitive"),
    (r"^from autograd\.extend import", "from _lazynp_autograd import"),
    (r"^from autograd\.builtins import", "from _lazynp_autograd import"),
    (r"^from autograd\.misc import", "from lazynp.autograd.misc import"),
    (r"^from autograd import", "from _lazynp_autograd import"),
    (r"^from numpy_utils import", "from numpy_utils import"),
]


def rewrite(text: str) -> str:
    """``text`` with autograd's imports pointed at lazynp (see the module docstring)."""
    out = []
    for line in text.splitlines(keepends=True):
        for pat, rep in REWRITES:
            new = re.sub(pat, rep, line)
            if new != line:
                line = new
                break
        out.append(line)
    return "".join(out)


def prepare(src: str, dest: str) -> list:
    """Copy ``src``/tests to ``dest`` rewritten; returns the test files kept."""
    tests = os.path.join(src, "tests")
    kept = []
    for name in sorted(os.listdir(tests)):
        if not name.endswith(".py") or name in LEFT_OUT:
            continue
        with open(os.path.join(tests, name)) as fh:
            text = fh.read()
        with open(os.path.join(dest, name), "w") as fh:
            fh.write(rewrite(text))
        if name.startswith("test_"):
            kept.append(name)
    with open(os.path.join(dest, "_lazynp_autograd.py"), "w") as fh:
        fh.write(SHIM)
    with open(os.path.join(dest, "_lazynp_test_util.py"), "w") as fh:
        fh.write(TEST_UTIL)
    with open(os.path.join(dest, "pytest.ini"), "w") as fh:
        fh.write("[pytest]\naddopts = -p no:cacheprovider\n")
    return kept


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", nargs="?", default=os.environ.get("AUTOGRAD_SRC",
                                                             "/work/vendor/autograd"))
    ap.add_argument("-k", default=None, help="pytest's -k expression")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    opts = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(opts.src, "tests")):
        print(f"no autograd checkout at {opts.src} (git clone https://github.com/HIPS/autograd)")
        return 2
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dest = tempfile.mkdtemp(prefix="autograd_tests_")
    try:
        files = prepare(opts.src, dest)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [dest, repo] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        cmd = [sys.executable, "-m", "pytest", "-q", "-rf", "--tb=line", "-W", "ignore",
               "--continue-on-collection-errors",
               "-c", os.path.join(dest, "pytest.ini"), "--rootdir", dest] + files
        if opts.k:
            cmd += ["-k", opts.k]
        proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True)
        out = proc.stdout + proc.stderr
        for line in out.splitlines():
            if line.startswith(("FAILED", "ERROR")):
                print(line[:300])
        tail = [ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
        print(tail[-1] if tail else out[-3000:])
        return proc.returncode
    finally:
        if opts.keep:
            print("kept:", dest)
        else:
            shutil.rmtree(dest, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

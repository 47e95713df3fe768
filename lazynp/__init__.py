"""lazynp: NumPy with a dependency engine behind it.

``import lazynp as np`` and existing NumPy code gives the same results, while every
operation is recorded into a dependency graph that runs later, planned and multi-threaded.
Names lazynp does not implement lazily fall back to NumPy (counted in :func:`stats`).

This module is the face: it re-exports the layers' public names (docs/how-it-works.md)
and runs the installers once, in one block below.
"""
from __future__ import annotations

import sys as _sys

import numpy as _np

from ._base import malloc as _malloc

# before anything loads Numba: glibc's thresholds apply to the allocations that follow
_malloc.tune()

# pickles made before the layered package name these two modules: import them before the
# name ``ndarray`` is bound to the class below (importing a submodule later rebinds it)
from . import ndarray as _old_ndarray_path, _ufunc as _old_ufunc_path  # noqa: E402,F401
from ._base import native as _native, split as _split  # noqa: E402
from .core import lifecycle as _lifecycle  # noqa: E402
from .core.policy import get_policy, policy, set_policy  # noqa: E402
from .array.ndarray import ndarray  # noqa: E402
from .devices import default_device, dask_shutdown, to_zarr, from_zarr  # noqa: E402
from ._numpy import composite as _composite, fallback as _fallback  # noqa: E402
from ._numpy import methods as _methods, namespace as _namespace  # noqa: E402
from ._numpy import binding as _binding  # noqa: E402
from ._numpy.fallback import FallbackError  # noqa: E402
from ._numpy.namespace import *  # noqa: E402,F401,F403
from ._numpy.composite import *  # noqa: E402,F401,F403
from ._numpy.ufunc import ufunc  # noqa: E402
from ._numpy.conversion import load, fromfile  # noqa: E402
from . import linalg, fft, random, lib  # noqa: E402  (testing: on first use, below)
from . import symbol  # noqa: E402
from .symbol import Symbol  # noqa: E402
from .jit import jit  # noqa: E402
from . import autograd  # noqa: E402
from .autograd import (grad, value_and_grad, vjp, jvp, jacobian, hessian,  # noqa: E402
                       elementwise_grad, custom_vjp, custom_jvp, hessian_vector_product,
                       make_vjp, make_jvp, make_hvp, stop_gradient)
from .autograd.vmap import vmap  # noqa: E402
from .autograd import symbolic as _symbolic_grad  # noqa: E402,F401  (installs Symbol.grad)
from .notebook.explain import explain  # noqa: E402
from ._api import evaluate, stats, reset_stats, set_strict, strict  # noqa: E402
from .kernels.settings import show_config, configure, clear_kernel_cache  # noqa: E402

# --- the installers, once ------------------------------------------------------------------
# the array's members that live in the namespace layer; the namespace in which NumPy's
# functions called on lazynp arrays find lazynp's versions; os.fork() and interpreter exit
# with work in flight; the C fast paths' two-thread split
_methods.install()
_fallback.register_namespace(_sys.modules[__name__])
_lifecycle.install()
_split.install(_native.ext)
# functions written in Python do not bind as methods where NumPy's do not (np.array)
for _mod, _np_mod in ((_sys.modules[__name__], _np), (linalg, _np.linalg), (fft, _np.fft),
                      (random, _np.random)):
    _binding.match_numpy(vars(_mod), _np_mod, _mod.__name__)

_all_lazy = _namespace.__all_lazy__ + _composite.__all__
__version__ = "0.1.0"
newaxis = None

_NP_SUBMODULES = ("polynomial", "ma", "char", "strings", "rec", "emath", "ctypeslib",
                  "exceptions", "dtypes", "typing", "matlib")


def __getattr__(name: str):
    if name in ("kvstore", "testing"):
        # imported on first use: kvstore loads dask.distributed, testing numpy.testing (40 ms,
        # which NumPy loads on first use too)
        import importlib
        return importlib.import_module(f".{name}", __name__)
    if name == "_core":
        from ._numpy.ufunc import core_module
        mod = globals()[name] = core_module()
        return mod
    if name in _NP_SUBMODULES:
        mod = _fallback.FallbackModule(f"lazynp.{name}", getattr(_np, name))
        globals()[name] = mod
        return mod
    try:
        obj = getattr(_np, name)
    except AttributeError:
        raise AttributeError(f"module 'lazynp' has no attribute {name!r}") from None
    if isinstance(obj, _np.ufunc):
        # an alias set on numpy by another library (numexpr sets numpy.expm1x = expm1)
        from ._numpy.ufunc import UFUNCS
        lazy = UFUNCS.get(obj.__name__)
        if lazy is not None and lazy._np is obj:
            globals()[name] = lazy
            return lazy
    wrapped = _fallback.fallback_attr(obj, name)
    globals()[name] = wrapped
    return wrapped


def __dir__():
    return sorted(set(dir(_np)) | set(globals()))


def trace(a, *args, **kwargs):
    """``numpy.trace(a, offset, axis1, axis2, dtype, out)`` for arrays; for a Python function,
    ``lazynp.trace(f, *example_args)`` traces it into a :class:`lazynp.Symbol`."""
    if callable(a) and not isinstance(a, ndarray):
        return symbol.trace(a, *args, **kwargs)
    return _namespace.trace(a, *args, **kwargs)

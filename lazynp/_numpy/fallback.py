"""NumPy fallback: any NumPy name lazynp does not implement lazily runs NumPy eagerly.

Lazy arguments are materialized, NumPy runs, array results are wrapped as lazynp arrays.
Each fallback is counted with its call site (``lazynp.stats()``); ``LAZYNP_STRICT=1`` (or
``lazynp.set_strict(True)``) makes a fallback raise :class:`FallbackError` naming it.
"""
from __future__ import annotations

import builtins
import functools
import types
import weakref
from collections import Counter, defaultdict

import numpy as np

from .._base import config as _config, site as _site
from . import binding as _binding
from ..core import graph, policy as _policy
from ..array.operands import to_numpy
from ..array.ndarray import ndarray
from . import outarg as _outarg

#: NumPy functions that write into an array argument: lazy arguments get a copy that is
#: written back after the call, so the graph sees the write.
MUTATING = {"fill_diagonal": (0,), "copyto": (0,), "put": (0,), "place": (0,),
            "putmask": (0,), "put_along_axis": (0,), "shuffle": (0,)}


class FallbackError(RuntimeError):
    """Raised in strict mode when a NumPy function has no lazy implementation."""


_counts: Counter = Counter()
_sites: dict = defaultdict(Counter)


def reset() -> None:
    _counts.clear()
    _sites.clear()


def report() -> dict:
    return {"fallbacks": dict(_counts),
            "fallback_sites": {k: {_site.format_site(s): n for s, n in v.items()}
                               for k, v in _sites.items()}}


def _note(name: str) -> None:
    if _config.STRICT:
        raise FallbackError(f"lazynp: no lazy implementation of numpy.{name} "
                            f"(LAZYNP_STRICT is set)")
    _counts[name] += 1
    _sites[name][_site.call_site(3)] += 1


def _readonly(v):
    if type(v) is np.ndarray:
        r = v.view()
        r.flags.writeable = False
        return r
    if type(v) in (list, tuple):
        return type(v)(_readonly(x) for x in v)
    return v


def _materialize_args(name: str, args, kwargs):
    mutated = MUTATING.get(name.rsplit(".", 1)[-1], ())
    writebacks = []
    new_args = []
    for i, a in enumerate(args):
        if i in mutated and isinstance(a, ndarray):
            v = np.array(a._value(), copy=True)
            writebacks.append((a, v))
            new_args.append(v)
        else:
            new_args.append(_readonly(to_numpy(a)))
    new_kwargs = {k: _readonly(to_numpy(v)) for k, v in kwargs.items() if k != "out"}
    if "out" in kwargs:
        # NumPy writes into out: a NumPy array is the user's buffer itself, a lazynp array
        # gets a copy written back after the call
        outs = kwargs["out"]
        new_outs = []
        for o in (outs if type(outs) is tuple else (outs,)):
            if isinstance(o, ndarray):
                v = np.array(o._value(), copy=True)
                writebacks.append((o, v))
                o = v
            new_outs.append(o)
        new_kwargs["out"] = tuple(new_outs) if type(outs) is tuple else new_outs[0]
    return new_args, new_kwargs, writebacks


def wrap_result(res, inputs=()):
    """Wrap NumPy arrays in a result (tuples, lists, namedtuples) as lazynp arrays."""
    if type(res) is np.ndarray:
        arr = res
        if not arr.flags.c_contiguous or not arr.flags.writeable or arr.base is not None:
            arr = np.array(arr, copy=True, order="C")
        if _policy.record_all:       # (a transform watches new leaves: lazynp.autograd)
            return ndarray._from_node(graph.leaf(arr))
        return ndarray._from_value(arr)     # (a computed array; a Var when one is needed)
    if isinstance(res, tuple) and hasattr(res, "_fields"):
        return type(res)(*[wrap_result(r) for r in res])
    if type(res) is tuple:
        return tuple(wrap_result(r) for r in res)
    if type(res) is list:
        return [wrap_result(r) for r in res]
    return res


#: the open autograd trace watching NumPy's computations (:func:`watch`), or None
watcher = None


def watch(observer) -> None:
    """Let ``observer`` (an open autograd trace; None: none) see every computation NumPy
    does on forced values: ``observer.forced(name, args, res)`` and, around each
    :func:`call_numpy`, ``state = observer.numpy_call_starts(args, kwargs)`` then
    ``observer.numpy_call_ended(state, name, args, kwargs, res)``."""
    global watcher
    watcher = observer


def forced(name: str, args, res):
    """Note that ``res`` was computed by NumPy from the forced values of ``args`` (not
    recorded); returns ``res``.  An open autograd trace (:func:`watch`) marks such results
    as non-differentiable when they depend on a differentiated input."""
    if watcher is not None:
        watcher.forced(name, args, res)
    return res


def call_numpy(fn, name: str, args, kwargs):
    """Run NumPy's ``fn`` on materialized arguments and wrap the result (counted; seen by
    an open autograd trace, :func:`watch`)."""
    if watcher is None:
        return _call_numpy(fn, name, args, kwargs)
    state = watcher.numpy_call_starts(args, kwargs)
    res = _call_numpy(fn, name, args, kwargs)
    watcher.numpy_call_ended(state, name, args, kwargs, res)
    return res


def _call_numpy(fn, name: str, args, kwargs):
    _note(name)
    if "out" not in kwargs and callable(fn):
        args, kwargs, out = _outarg.split_out(fn, args, kwargs)
        if out is not None:
            kwargs["out"] = out
    new_args, new_kwargs, writebacks = _materialize_args(name, args, kwargs)
    res = fn(*new_args, **new_kwargs)
    for arr, v in writebacks:
        arr[...] = v
        if res is v:
            res = arr
    if "out" in kwargs:
        given, passed = kwargs["out"], new_kwargs["out"]
        if res is passed:
            return given                    # NumPy returns out itself
        if type(res) is tuple and type(passed) is tuple and len(res) == len(passed) and \
                builtins.all(r is p for r, p in zip(res, passed)):
            return given
    out = wrap_result(res)
    tag_fallback(out, name)       # (drawn as a fallback by lazynp.explain)
    return out


#: computed nodes made by a NumPy fallback -> the NumPy name (see :func:`call_numpy`; read
#: by :mod:`lazynp.notebook.explain`)
FALLBACK_NODES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def tag_fallback(result, name: str) -> None:
    """Remember that the arrays in ``result`` came from NumPy's ``name`` (for pictures)."""
    if isinstance(result, ndarray):
        FALLBACK_NODES[result._var.head] = name     # (a computed array gets its Var now)
    elif isinstance(result, (tuple, list)):
        for r in result:
            tag_fallback(r, name)


def fallback_function(fn, name: str):
    """A lazynp callable that falls back to NumPy's ``fn``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return call_numpy(fn, name, args, kwargs)
    wrapper._lazynp_fallback = True
    prefix = name.rpartition(".")[0]
    return _binding.like_numpy(wrapper, fn, f"lazynp.{prefix}" if prefix else "lazynp")


def fallback_attr(np_obj, name: str):
    """What lazynp exposes for NumPy attribute ``np_obj``: NumPy's own object unless it is
    a plain function (then a counted fallback)."""
    if isinstance(np_obj, (types.FunctionType, types.BuiltinFunctionType)) or \
            type(np_obj).__name__ in ("_ArrayFunctionDispatcher", "cython_function_or_method"):
        return fallback_function(np_obj, name)
    return np_obj


#: the public namespace, ``lazynp`` itself (:func:`register_namespace`)
_namespace: types.ModuleType | None = None


def register_namespace(module: types.ModuleType) -> None:
    """Make ``module`` (``lazynp``: called once, by lazynp/__init__.py) the namespace in
    which :func:`dispatch_numpy_function` finds lazynp's version of a NumPy function
    (``numpy.linalg.solve``: ``lazynp.linalg.solve``)."""
    global _namespace
    _namespace = module


def public_namespace() -> types.ModuleType:
    """The public namespace, ``lazynp`` (see :func:`register_namespace`)."""
    return _namespace


def dispatch_numpy_function(func, args, kwargs):
    """``__array_function__``: run lazynp's version of a NumPy function when there is one."""
    mod = getattr(func, "__module__", "numpy") or "numpy"
    name = func.__name__
    target = _namespace
    for part in mod.split(".")[1:]:
        target = getattr(target, part, None)
        if target is None:
            break
    impl = getattr(target, name, None) if target is not None else None
    if impl is None or getattr(impl, "_lazynp_fallback", False):
        return call_numpy(func, f"{mod.replace('numpy', '').lstrip('.') + '.' if mod != 'numpy' else ''}{name}",
                          args, kwargs)
    return impl(*args, **kwargs)


class FallbackModule(types.ModuleType):
    """A lazynp submodule: its own lazy functions, NumPy's for the rest (counted)."""

    def __init__(self, name: str, np_module, overrides: dict | None = None):
        super().__init__(name)
        self._np_module = np_module
        self.__dict__.update(overrides or {})
        self.__doc__ = np_module.__doc__

    def __getattr__(self, attr):
        if attr == "__all__":               # (NumPy's list of its public names)
            return self._np_module.__all__
        if attr.startswith("__"):
            raise AttributeError(attr)
        obj = getattr(self._np_module, attr)
        prefix = self.__name__.replace("lazynp.", "").replace("lazynp", "")
        wrapped = fallback_attr(obj, f"{prefix}.{attr}" if prefix else attr)
        if isinstance(obj, types.ModuleType) and obj.__name__.startswith("numpy."):
            wrapped = FallbackModule(f"{self.__name__}.{attr}", obj)
        setattr(self, attr, wrapped)
        return wrapped

    def __dir__(self):
        return sorted(set(dir(self._np_module)) | set(self.__dict__))

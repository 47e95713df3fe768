"""Namespace functions that do not bind as methods, where NumPy's do not.

``class T: array = numpy.array`` then ``T().array([1, 2])`` works: NumPy's ``array`` is a
builtin, which does not bind to the instance.  A lazynp function written in Python would
(``T().array`` passes the instance as the first argument).  :class:`NumpyFunction` wraps
such a function without binding, keeping its call path in C (``staticmethod`` is callable),
its ``__name__``, ``__doc__``, ``__wrapped__`` (so ``inspect.signature``), and pickling by
public name.  NumPy's dispatchers and plain Python functions do bind: lazynp's stay as they
are there (:func:`match_numpy`).
"""
from __future__ import annotations

import importlib
import inspect
import types


class NumpyFunction(staticmethod):
    """A callable that does not bind as a method (like NumPy's builtin functions)."""

    def __get__(self, obj, cls=None):
        return self

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    def __reduce__(self):
        return (_by_name, (self._lazynp_home, self.__name__))


def _by_name(home: str, name: str):
    """``home.name`` (``home``: "lazynp" or a dotted submodule, ``lazynp.ma`` included)."""
    first, *rest = home.split(".")
    obj = importlib.import_module(first)
    for part in rest:
        obj = getattr(obj, part)
    return getattr(obj, name)


def binds(fn) -> bool:
    """Does ``fn``, set as a class attribute, bind to the instance (a method)?"""
    if isinstance(fn, type):
        return False
    get = getattr(type(fn), "__get__", None)
    if get is None:
        return False
    instance = object()
    bound = get(fn, instance, object)
    return bound is not fn and getattr(bound, "__self__", None) is instance


def non_binding(fn, home: str) -> NumpyFunction:
    """``fn`` as a :class:`NumpyFunction` found (and pickled) as ``home.<name>``."""
    if isinstance(fn, NumpyFunction):
        return fn
    wrapped = NumpyFunction(fn)
    for attr in ("_lazynp_fallback", "_lazynp_eager"):
        if hasattr(fn, attr):
            setattr(wrapped, attr, getattr(fn, attr))
    if hasattr(fn, "_np_gufunc"):       # a gufunc's face (lazynp.ufunc.give_gufunc_face)
        wrapped.__dict__.update({k: v for k, v in fn.__dict__.items() if k != "__wrapped__"})
    wrapped._lazynp_home = home
    return wrapped


def like_numpy(fn, np_fn, home: str):
    """``fn`` (lazynp's version of NumPy's ``np_fn``), not binding where ``np_fn`` does not."""
    if isinstance(fn, types.FunctionType) and callable(np_fn) and not binds(np_fn):
        return non_binding(fn, home)
    return fn


_VARARGS = 0x04 | 0x08        # CO_VARARGS | CO_VARKEYWORDS


def _generic_signature(fn: types.FunctionType) -> bool:
    """Does ``fn`` take just ``(*args, **kwargs)`` (a generic wrapper)?"""
    code = fn.__code__
    return code.co_flags & _VARARGS == _VARARGS and code.co_argcount == 0 and \
        code.co_kwonlyargcount == 0 and "__signature__" not in fn.__dict__ and \
        "__wrapped__" not in fn.__dict__


def match_numpy(namespace: dict, np_module: types.ModuleType, home: str) -> None:
    """Make the public Python functions of ``namespace`` (a module's globals, its public
    name ``home``) non-binding where NumPy's function of that name in ``np_module`` is,
    and give those that take ``(*args, **kwargs)`` NumPy's signature."""
    for name, fn in list(namespace.items()):
        if name.startswith("_") or not isinstance(fn, types.FunctionType):
            continue
        np_fn = getattr(np_module, name, None)
        if np_fn is None or not callable(np_fn):
            continue
        if _generic_signature(fn):
            try:
                fn.__signature__ = inspect.signature(np_fn)
            except (TypeError, ValueError):
                pass
        namespace[name] = like_numpy(fn, np_fn, home)

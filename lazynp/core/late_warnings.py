"""NumPy's floating-point warnings for work that runs after its call: issued at the user's
recording line, through the ``warnings`` filters that were in force at the call.

NumPy warns ("divide by zero encountered in divide") from inside the ufunc, attributing the
warning to the innermost Python frame: for recorded work that is a lazynp file, on whatever
thread runs the flush.  So the executor runs ops under a copy of their ``np.errstate``
whose ``"warn"`` entries are ``"log"``: NumPy then hands the message to :data:`LOG` instead,
and :func:`issue` re-issues it with :func:`warnings.warn_explicit` at the node's recording
line (the registry of that line's module, so "once per location" works as for NumPy).

The ``warnings`` state at the call (:class:`WarningsState`: the filters and where shown
warnings go, as ``warnings.catch_warnings`` sets them) is kept on each recorded node that can
warn; when the state at the flush differs (the call was inside a ``catch_warnings`` block
that has ended since, or the filters changed), the warning goes through the call's state.
"""
from __future__ import annotations

import sys
import threading
import warnings

import numpy as np
from numpy._core.umath import _extobj_contextvar as _extobj_var

from .._base import site as _site

_PREFIX = "Warning: "
#: messages NumPy logged, per thread id, not yet issued
caught: dict = {}


class _Log:
    """The ``np.errstate(call=...)`` object of executed ops (errstate mode ``"log"``)."""

    def write(self, msg: str) -> None:
        caught.setdefault(threading.get_ident(), []).append(msg)


LOG = _Log()
DEFAULT_EXT = _extobj_var.get()
_logging: dict = {}


def logging_ext(ext):
    """``ext`` (an ``np.errstate`` object) with its ``"warn"`` entries turned into ``"log"``
    to :data:`LOG`; ``ext`` itself when nothing warns or the user set a callback of their
    own (which must then see the error itself)."""
    hit = _logging.get(ext)
    if hit is None:
        token = _extobj_var.set(ext)
        try:
            err = np.geterr()
            if np.geterrcall() is not None or "warn" not in err.values():
                hit = ext
            else:
                with np.errstate(call=LOG, **{k: "log" for k, v in err.items() if v == "warn"}):
                    hit = _extobj_var.get()
        finally:
            _extobj_var.reset(token)
        if len(_logging) > 256:     # (each ``with np.errstate`` makes a new object)
            _logging.clear()
        _logging[ext] = hit
    return hit


LOG_DEFAULT = logging_ext(DEFAULT_EXT)


class WarningsState:
    """The ``warnings`` module's state at a call: its filters and where shown warnings go."""

    __slots__ = ("lst", "n", "first", "filters", "impl", "show", "traps", "ignores")

    def __init__(self, lst: list):
        self.lst = lst
        self.n = len(lst)
        self.first = lst[0] if lst else None
        self.filters = tuple(lst)
        self.impl = getattr(warnings, "_showwarnmsg_impl", None)
        self.show = warnings.showwarning
        self.traps = _first_catch_all(self.filters) == "error"
        self.ignores = _first_catch_all(self.filters) == "ignore"

    def same_as(self, other: "WarningsState") -> bool:
        return self is other or (self.filters == other.filters and self.impl is other.impl
                                 and self.show is other.show)


def _first_catch_all(filters) -> str | None:
    """What ``filters`` do with a RuntimeWarning: ``"error"`` when the first filter that may
    match one is an error filter (NumPy may then raise at the call), else the action of the
    first filter matching every RuntimeWarning (None when none does)."""
    for action, msg, cat, mod, lineno in filters:
        if issubclass(RuntimeWarning, cat):
            if action == "error":
                return "error"
            if msg is None and mod is None and not lineno:
                return action       # (it matches every RuntimeWarning: it decides)
    return None


_current = WarningsState(warnings.filters)


def state() -> WarningsState:
    """The current :class:`WarningsState` (the same object while the filters list is the
    same, of the same length, with the same first filter: a few comparisons)."""
    global _current
    lst = warnings.filters
    cur = _current
    if lst is cur.lst and len(lst) == cur.n and (lst[0] if lst else None) is cur.first:
        return cur
    cur = _current = WarningsState(lst)
    return cur


_swap_lock = threading.Lock()
_modules: dict = {}     # file name -> (module name, registry dict)


def _modules_now() -> list:
    """``sys.modules``' items now.  (Another thread may import meanwhile: the compile
    thread loads each kernel's module; a collection that runs during the copy can let it
    in, and the copy then raises "dictionary changed size during iteration": taken
    again.)"""
    while True:
        try:
            return list(sys.modules.items())
        except RuntimeError:
            continue


def _module_of(filename: str):
    """``(module name, __warningregistry__)`` of the module whose file is ``filename``."""
    hit = _modules.get(filename)
    if hit is None:
        name, registry = None, None
        for mname, mod in _modules_now():
            if getattr(mod, "__file__", None) == filename:
                name = mname
                registry = vars(mod).setdefault("__warningregistry__", {})
                if mname == "__main__":
                    break
        if name is None:
            base = filename.rsplit("/", 1)[-1]
            name = base[:-3] if base.endswith(".py") else base
            registry = {}
        hit = _modules[filename] = (name, registry)
    return hit


def take(ident: int | None = None):
    """The messages logged by this thread (None when there are none), removed."""
    return caught.pop(threading.get_ident() if ident is None else ident, None)


def issue(msgs, site, wstate: WarningsState | None = None) -> None:
    """Issue NumPy's logged ``msgs`` as RuntimeWarnings at ``site`` (``(code, offset)``, or
    None for the calling user line), through the warnings state ``wstate`` of the call (None:
    the current one).  Raises like ``warnings.warn`` (an ``"error"`` filter)."""
    if site is None:
        f = _site.user_frame(2)
        site = (f.f_code, f.f_lasti) if f is not None else None
    if site is None:
        filename, lineno = "<unknown>", 0
    else:
        code, lasti = site
        filename = code.co_filename
        lineno = _site.line_of(code, lasti) or code.co_firstlineno
    module, registry = _module_of(filename)
    texts = [m[len(_PREFIX):].rstrip("\n") if m.startswith(_PREFIX) else m.rstrip("\n")
             for m in msgs]
    if wstate is None or wstate.same_as(state()):
        for t in texts:
            warnings.warn_explicit(t, RuntimeWarning, filename, lineno, module, registry)
        return
    # the call's warnings state is no longer in force: issue through it
    with _swap_lock:
        saved = (warnings.filters, getattr(warnings, "_showwarnmsg_impl", None),
                 warnings.showwarning)
        warnings.filters = list(wstate.filters)
        if wstate.impl is not None:
            warnings._showwarnmsg_impl = wstate.impl
        warnings.showwarning = wstate.show
        warnings._filters_mutated()
        try:
            for t in texts:
                warnings.warn_explicit(t, RuntimeWarning, filename, lineno, module, registry)
        finally:
            warnings.filters = saved[0]
            if saved[1] is not None:
                warnings._showwarnmsg_impl = saved[1]
            warnings.showwarning = saved[2]
            warnings._filters_mutated()

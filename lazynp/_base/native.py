"""The one door to the C extension (``lazynp._base._speedups``, built from ``_speedups.pyx``).

Every module that uses the extension takes it from here (:data:`ext`), never by importing
it: so there is one place that decides whether it is used.  It is None when it is not built
(no C compiler at install time) or when ``LAZYNP_PURE_PYTHON=1`` is set; lazynp then runs
the pure Python versions of the same code (``core/recorder.py``, ``core/executor.py``,
``_numpy/ufunc.py``...), which are the reference the extension is tested against.

The extension holds no rule of its own and reads no module's globals: the modules above
hand it what it needs through the named calls of :data:`INTERFACE` (callables, state
objects such as ``core.state``'s record counters and ``lone_sites`` dict, and numbers),
and setters push it the mutable flags (``core.state.shared.keep_graph``, ``devices.HOOK``,
the policy's numbers).  ``tests/test_native_interface.py`` keeps the two sides in step:
every call below takes exactly these names, and the ``configure...`` calls take them as
required keywords (a missing one is a TypeError at import).
"""
from __future__ import annotations

from types import ModuleType

from . import config as _config


def _load() -> ModuleType | None:
    """The extension module, or None (not built, or ``LAZYNP_PURE_PYTHON`` set)."""
    if _config.PURE_PYTHON:
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


#: The C extension module, or None: the pure Python code runs instead.
ext: ModuleType | None = _load()


#: Every call through which Python hands the extension what it reads: name -> its
#: parameters, and the module that makes the call.
INTERFACE: dict[str, tuple[tuple[str, ...], str]] = {
    "configure": (("bound_flush", "extobj_var", "default_ext", "pkg", "tree_ids",
                   "tree_structure", "merge_inputs", "max_tree", "max_pending",
                   "flush", "restart_site", "run_untreed", "tree_into", "lone_sites",
                   "fragment_sites", "for_op_at_once",
                   "run_eager", "run_now", "value_for_eager",
                   "protected_ranges", "errstate_traps", "errstate_ignores", "run_at_call",
                   "warnings_state", "warnings_module", "log_default", "caught",
                   "issue_caught"), "lazynp.core.recorder"),
    "configure_executor": (("view", "book_lock", "pool_min_bytes", "value_of", "normalize",
                            "node_failed", "ndarray"), "lazynp.core.executor"),
    "set_keep_graph": (("n",), "lazynp.core.recorder"),
    "set_policy": (("record_all", "eager_max", "tree_min", "tree_max", "sized_kinds",
                    "tree_op", "op_bounds"), "lazynp.core.policy"),
    "set_transforms": (("n",), "lazynp.core.policy"),
    "configure_split": (("fn", "min_costly", "min_cheap", "costly", "ufuncs_by_kind"),
                        "lazynp._base.split"),
    "configure_row_split": (("run", "min_elems"), "lazynp._base.split"),
    "configure_blas_note": (("note", "min_elems", "functions"), "lazynp._base.split"),
    "configure_array": (("cls", "leaf", "leaf_op", "materialize", "getitem", "setitem",
                         "writable", "construct", "data_offset", "view_on",
                         "array", "array_ufunc", "transpose", "check_buffer_dtype"),
                        "lazynp.array.ndarray"),
    "configure_parts": (("real", "imag"), "lazynp.array.ndarray"),
    "set_metatype": (("cls", "meta"), "lazynp.array.ndarray"),
    "install_member": (("cls", "name", "value"), "lazynp.array.ndarray"),
    "configure_methods": (("python_methods", "shortcuts"), "lazynp._numpy.methods"),
    "configure_dunders": (("forward", "reflected", "inplace", "compare", "unary",
                           "forward_plain", "inplace_plain", "never_defer"),
                          "lazynp._numpy.methods"),
    "configure_eager": (("not_eager", "try_call", "try_method", "wrap"),
                        "lazynp._numpy.eager"),
    "configure_device_hook": (("dispatch",), "lazynp._numpy.eager"),
    "set_device_hook": (("on",), "lazynp.devices"),
    "set_tape": (("tape", "paused"), "lazynp.core.recorder"),
    "set_recorder": (("recorder",), "tests.test_speedups"),
}

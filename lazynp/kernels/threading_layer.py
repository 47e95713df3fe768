"""Numba's threading layer, which runs lazynp's parallel kernels (and, being one per
process, every other ``parallel=True`` Numba function in the process).

lazynp asks for ``workqueue``: it survives ``fork()`` everywhere, while with GNU OpenMP
(Numba's choice where TBB is not installed) a forked child that runs a parallel kernel is
terminated, which breaks ``multiprocessing``.  ``workqueue`` is not thread-safe, so lazynp
launches its parallel kernels one at a time (:class:`lazynp.kernels.cpu._OneAtATime`).

lazynp leaves the layer alone (and says why in :func:`lazynp.show_config`) when the user
configured Numba: ``NUMBA_THREADING_LAYER`` set, ``numba.config.THREADING_LAYER`` set in
code before lazynp chooses, or Numba's threads already running; or when
``LAZYNP_THREADING_LAYER=default`` (or :func:`set_layer` ``("default")``) asks for
Numba's own choice.  Any layer name Numba accepts can be asked for instead.

``import lazynp`` does not import Numba, so the choice (:func:`ensure_chosen`) is made when
Numba is first needed, always before Numba's threads start: at ``import lazynp`` when Numba
is already imported; else at Numba's first compile (its extension entry point,
:mod:`lazynp_numba_extension`), lazynp's first kernel or :func:`lazynp.show_config`,
whichever comes first.  A ``numba.config.THREADING_LAYER`` set after ``import lazynp`` but
before that moment is therefore respected too.  The name in ``LAZYNP_THREADING_LAYER`` is
checked at import (:func:`wanted_layer`).
"""
from __future__ import annotations

import os
import sys
import threading

from .._base import config as _config

LAYERS = ("default", "safe", "forksafe", "threadsafe", "tbb", "omp", "workqueue")

#: ``numba.config.THREADING_LAYER`` before lazynp set it (None: lazynp did not set it)
_before: str | None = None
#: why the layer is what it is (for lazynp.show_config)
decision = "not chosen yet"
_chosen = False
_choose_lock = threading.RLock()


def wanted_layer() -> str:
    """The layer ``LAZYNP_THREADING_LAYER`` asks for; raises ValueError naming the variable
    for a name Numba does not accept (checked at ``import lazynp``, without Numba)."""
    name = _config.THREADING_LAYER.strip().lower()
    if name not in LAYERS:
        raise ValueError(f"LAZYNP_THREADING_LAYER={name!r}: expected one of {LAYERS}")
    return name


def ensure_chosen() -> str:
    """Make lazynp's choice (:func:`choose`) once, importing Numba; returns
    :data:`decision`.  Called before anything of lazynp's runs on Numba."""
    if not _chosen:
        with _choose_lock:
            if not _chosen:
                choose()
    return decision


def choose_if_numba_loaded() -> None:
    """At ``import lazynp``: choose now when the user imported Numba first (Numba's own
    parallel functions may run before any lazynp kernel)."""
    if "numba" in sys.modules:
        ensure_chosen()


def _running() -> str | None:
    """The layer Numba's threads run on, or None when no parallel kernel ran yet."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is None or not getattr(parallel, "_is_initialized", False):
        return None
    try:
        import numba
        return numba.threading_layer()
    except (ValueError, ImportError):
        return None


def running() -> str | None:
    """The threading layer Numba's threads run on, or None while none was launched."""
    return _running()


def choose(wanted: str | None = None) -> str:
    """Before Numba's first use (:func:`ensure_chosen`): ask Numba for ``wanted`` (default
    ``LAZYNP_THREADING_LAYER``) unless the user configured Numba's threading layer; returns
    :data:`decision`."""
    global decision, _before, _chosen
    import numba
    wanted = wanted_layer() if wanted is None else wanted.strip().lower()
    if wanted not in LAYERS:
        raise ValueError(f"LAZYNP_THREADING_LAYER={wanted!r}: expected one of {LAYERS}")
    _chosen = True
    current = str(numba.config.THREADING_LAYER).lower()
    if wanted == "default":
        decision = "Numba's own choice (LAZYNP_THREADING_LAYER=default)"
    elif "NUMBA_THREADING_LAYER" in os.environ:
        decision = (f"{os.environ['NUMBA_THREADING_LAYER']!r}, left as the user set it "
                    "(NUMBA_THREADING_LAYER)")
    elif current != "default":
        decision = f"{current!r}, left as the user set it (numba.config.THREADING_LAYER)"
    elif _running() is not None:
        decision = (f"{_running()!r}, left: Numba's threads were running before lazynp "
                    "chose one")
    else:
        _before = numba.config.THREADING_LAYER
        numba.config.THREADING_LAYER = wanted
        decision = (f"{wanted!r}, set by lazynp (LAZYNP_THREADING_LAYER=default or "
                    "lazynp.configure(threading_layer='default') leaves Numba's choice)")
    return decision


def set_layer(name: str) -> str:
    """After import, before the first parallel kernel runs: ask Numba for layer ``name``
    (``"default"``: give back the value lazynp found).  Raises RuntimeError once Numba's
    threads run (the layer is fixed for the process then)."""
    global decision, _before, _chosen
    import numba
    _chosen = True      # (the user's choice: lazynp's own is not made after it)
    name = str(name).strip().lower()
    if name not in LAYERS:
        raise ValueError(f"lazynp.configure: threading_layer={name!r}: expected one of "
                         f"{LAYERS}")
    active = _running()
    if active is not None:
        raise RuntimeError(f"lazynp.configure: Numba's threading layer {active!r} already "
                           "runs in this process and cannot change; set "
                           "LAZYNP_THREADING_LAYER (or NUMBA_THREADING_LAYER) before the "
                           "process starts")
    if name == "default":
        if _before is not None:
            numba.config.THREADING_LAYER = _before
            _before = None
        decision = "Numba's own choice (set by lazynp.configure)"
    else:
        if _before is None:
            _before = numba.config.THREADING_LAYER
        numba.config.THREADING_LAYER = name
        decision = f"{name!r} (set by lazynp.configure)"
    return decision

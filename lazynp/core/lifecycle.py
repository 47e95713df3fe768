"""The process around lazynp's threads: ``os.fork()`` and interpreter exit.

**Fork**: the child has every value and a working library, and the fork does not wait for
background work.  A fork copies only the calling thread, so before it:

* the recorder's lock is taken (no flush is half handed to the engine in the child), then
  the operations already pushed to the engine finish: they are the user's own computation,
  which NumPy would have done before reaching the fork; other threads cannot push more
  meanwhile (flushes push under the recorder's lock);
* the kernel compiles queued on the background thread are *not* waited for: the child gets
  a fresh compile queue and thread and compiles what it needs itself.  A compile running at
  the fork holds Numba's compiler lock (and LLVM's), which would stay held in the child;
  then the child runs its fused groups on NumPy instead of compiling (correct values, no
  deadlock; see :func:`lazynp.kernels.cpu.fork_prepare`);
* the remaining locks (the executor's bookkeeping, the kernel queue, the buffer pool) are
  held across the fork and released on both sides; the child's engine and split helper
  start fresh threads when they are needed.

``multiprocessing`` with the ``fork`` start method goes through here too.

**Exit**: the engine's workers and the compile thread are daemon threads.  Left running
while the interpreter finalizes, a kernel or a compile can touch memory being freed (a
crash at exit); so at exit the pushed work finishes and no new compile starts.
"""
from __future__ import annotations

import atexit
import os

from .._base import split as _split
from .. import engine
from . import graph
from ..kernels import cpu, merge, pool

#: another thread may push to the engine without the recorder's lock (the key-value
#: store's transfers): wait again, at most this often, then fork with it in flight
_ATTEMPTS = 100
_held: list = []       # the fork_done callbacks of what _before_fork holds, in order


def _hold(prepare, done) -> bool:
    idle = prepare()
    _held.append(done)
    return idle


def _hold_idle_engine() -> None:
    """With the recorder's lock held: let the pushed work finish, then hold the engine."""
    eng = engine.get_engine()
    for attempt in range(_ATTEMPTS):
        eng.wait_all()
        if eng.fork_prepare() or attempt == _ATTEMPTS - 1:
            _held.append(eng.fork_done)
            return
        eng.fork_done(False)


def _release(child: bool) -> None:
    while _held:
        _held.pop()(child)


def _before_fork() -> None:
    # (the order in which a flush takes the locks: the recorder's before the engine's; the
    # engine's workers take the executor's lock while an op runs, so it comes after)
    _hold(graph.fork_prepare_recorder, graph.fork_done_recorder)
    _hold_idle_engine()
    _hold(graph.fork_prepare_executor, graph.fork_done_executor)
    _hold(cpu.fork_prepare, cpu.fork_done)
    _hold(pool.fork_prepare, pool.fork_done)


def _after_fork_in_parent() -> None:
    _release(child=False)


def _after_fork_in_child() -> None:
    _release(child=True)
    _split.reset_after_fork()


def _at_exit() -> None:
    cpu.stop_compiles()
    engine.wait_all()


def install() -> None:
    """Register the fork and exit hooks, and the merge that lets a large stable argsort run
    on two threads (once, at import)."""
    _split.register_stable_merge(_split.StableMerge(merge.mergeable, merge.kernel_for,
                                                    merge.merge))
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                            after_in_child=_after_fork_in_child)
    atexit.register(_at_exit)

"""The process around lazynp's threads: ``os.fork()`` and interpreter exit.

**Fork**: the child has every value and a working library.  A fork copies only the calling
thread.  Work in flight on the engine's threads, or a kernel
compile in the background thread, would never finish in the child, and a lock one of them
held would stay held there: a read of such an array waited forever.  So before a fork
lazynp lets that work finish and holds its locks (the fork waits for it, as it would for
NumPy code that computes before it forks); the child then starts fresh threads when it
needs them.  ``multiprocessing`` with the ``fork`` start method goes through here too.

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

_ATTEMPTS = 100        # another thread may push work while the fork waits: wait again
_held: list = []       # the fork_done callbacks of what fork_prepare holds, in order


def _prepare_all(last: bool) -> bool:
    """Let the work in flight finish, then hold each part still, in the order a flush
    takes the locks (the recorder's before the engine's); the engine's worker threads
    take the executor's lock while an op runs, so it is taken once the engine is idle.
    False, with everything released, when work arrived meanwhile (unless ``last``: then
    the fork goes ahead, and what is in flight is lost in the child)."""
    eng = engine.get_engine()
    cpu.wait_compiles()
    eng.wait_all()
    steps = ((graph.fork_prepare_recorder, graph.fork_done_recorder),
             (eng.fork_prepare, eng.fork_done),
             (graph.fork_prepare_executor, graph.fork_done_executor),
             (cpu.fork_prepare, cpu.fork_done), (pool.fork_prepare, pool.fork_done))
    for prepare, done in steps:
        idle = prepare()
        _held.append(done)
        if not idle and not last:
            _release(child=False)
            return False
    return True


def _release(child: bool) -> None:
    while _held:
        _held.pop()(child)


def _before_fork() -> None:
    for attempt in range(_ATTEMPTS):
        if _prepare_all(last=attempt == _ATTEMPTS - 1):
            return


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

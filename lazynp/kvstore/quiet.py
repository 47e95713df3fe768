"""Silence dask's, distributed's and tornado's logs below CRITICAL in this process.

For dask worker processes (:func:`cluster_kwargs`, or ``preload=["lazynp.kvstore.quiet"]``):
when a server or worker process is lost, every other process of the cluster logs the broken
connections and cancelled actor calls as tracebacks, while the store reports the loss once,
as a :class:`~lazynp.kvstore.KVStoreError`. The training CLI runs its embedded cluster with
it and runs in :func:`silenced` in the driver.
"""
from __future__ import annotations

import contextlib
import logging
from typing import Iterator

#: loggers whose ERROR records repeat, as tracebacks, a loss the KVStore reports itself
LOGGERS = ("distributed", "tornado", "tornado.application", "tornado.general", "asyncio",
           "bokeh")


#: the preload as script text (dask runs text with a space as a script): the worker
#: processes need not import lazynp to start, nor does one that a nanny restarts after a loss
PRELOAD = ("import logging, signal, threading\n"
           f"for name in {LOGGERS!r}:\n"
           "    logging.getLogger(name).setLevel(logging.CRITICAL)\n"
           "if threading.current_thread() is threading.main_thread():\n"
           "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n")


def cluster_kwargs() -> dict:
    """Arguments of a ``LocalCluster`` whose worker processes log only CRITICAL records
    and ignore SIGINT (``kvstore.create(..., cluster_kwargs=quiet.cluster_kwargs())``): a
    terminal's Ctrl-C reaches the whole process group, and each worker would print its
    KeyboardInterrupt traceback; the driver handles it and closes the cluster."""
    return {"silence_logs": logging.CRITICAL, "preload": [PRELOAD]}


def silence() -> None:
    """Only CRITICAL records of :data:`LOGGERS` in this process from now on."""
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def dask_setup(worker) -> None:
    """The preload hook: runs in each worker process when its worker starts."""
    silence()


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """:func:`silence` for the block; the loggers' levels are restored after it."""
    old = {name: logging.getLogger(name).level for name in LOGGERS}
    silence()
    try:
        yield
    finally:
        for name, level in old.items():
            logging.getLogger(name).setLevel(level)

"""Engine integration: pushes and pulls are lazynp engine operations.

This is the only module of ``lazynp.kvstore`` that touches the lazynp core, so that it can be
adapted in one place when the core changes.  What it relies on, exactly:

* ``lazynp.engine``: ``new_var()``, ``push(fn, reads, writes)`` (MXNet's contract: ``fn``
  runs once the ops pushed earlier that write ``reads`` or touch ``writes`` are done),
  ``push_async(fn, reads, writes)`` (MXNet's ``PushAsync``: ``fn(done)`` may return at once,
  the op keeps its vars until ``done()`` is called from any thread) and
  ``wait_for_var(var)``.
* ``lazynp.core.graph``: a lazy array's current value is the node ``arr._node()``; a node has
  ``state`` (``graph.PENDING`` until a flush schedules it), ``op`` and ``args`` (a view node,
  ``op is graph.VIEW``, reads its base node ``args[0]``), and once scheduled ``engine_var``, the
  engine var its producing engine op writes.  ``graph.flush(nodes, wait=False)`` schedules
  the pending work behind ``nodes`` on the engine and returns at once;
  ``graph.materialize(node)`` returns the NumPy value of a node whose producer has run
  (without waiting, so it may be called from inside an engine op).
* A node whose ``state`` is ``graph.SCHEDULED``, with an ``engine_var``, is a value being
  computed: readers wait for the ops writing that var; the op sets ``value`` (or
  ``error``) and ``state = graph.DONE`` before it completes.
* ``graph.leaf(value)`` makes a computed node with its own ``engine_var``, which may be replaced;
  a pending node that reads a computed node waits (through the engine) for the ops that
  write that node's ``engine_var``.
* ``graph.record(op, args, params, shape, dtype)`` adds a node of an op registered with
  ``lazynp.ops.registry.register(Op(name, "opaque", impl))``; when it runs,
  ``impl(*arg_values, **params)`` returns its NumPy value, and an exception it raises is
  raised where the array is read.  ``ndarray._from_node(node)`` wraps a node as an array.
* ``lazynp.core.policy``: the execution policy runs small work at once; ``enter_transform()`` /
  ``exit_transform()`` make every operation recorded in between (as a transform does).  A
  pull's node and its write into ``out`` must be recorded (run at once, they would wait for
  the server at the call), so they are recorded inside :func:`_recorded`.
* Writing ``out[...] = x`` into a lazynp array records a write that reads ``x``; and, to
  avoid that copy for a whole array (``out._geom is None``), ``out._var.set_head(node)``
  makes ``node`` the new version of the array's storage, as every write does: reads
  recorded earlier keep the old version.

How a push works: the value (the sum of the replicas, still lazy) is flushed without waiting,
and an asynchronous engine op that reads the value's engine var and writes the key's var
starts the transfer once the value is computed, while the rest of the backward pass still
runs; it completes when the server acknowledges, so until then the gradient's buffer is
neither written nor reused (it is sent from that buffer, without a copy), and ``wait()``
waits for the key's var.  How a pull works (``dist_*``): the request goes to the servers at
the call; the array ``out`` gets a scheduled value whose engine var is written by an
asynchronous op that completes when the answer arrives (:func:`arriving_value`).  Reading
``out``, or running an op that reads it, waits for it like for any pending value, and no
engine thread waits for the network meanwhile.  (The in-process ``"local"`` store pulls
with a recorded op ordered after the key's pushes: :func:`pending_value`.)
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ..core import policy as _policy, graph
from .. import engine
from . import buffers
from ..array.ndarray import ndarray as _lazy_ndarray
from ..ops.registry import OPS, Op, register


def _pull_impl(token: np.ndarray, produce: Callable[[], np.ndarray]) -> np.ndarray:
    return produce()


PULL_OP = OPS.get("kvstore_pull") or register(Op("kvstore_pull", "opaque", _pull_impl,
                                                       raises_on_values=False))


@contextlib.contextmanager
def _recorded():
    """Record every operation inside (never run at once by the execution policy)."""
    _policy.enter_transform()
    try:
        yield
    finally:
        _policy.exit_transform()


def is_lazy(x: Any) -> bool:
    """True for a lazynp array."""
    return isinstance(x, _lazy_ndarray)


def as_array(x: Any) -> Any:
    """A lazynp or NumPy array as it is; anything else through ``numpy.asarray``."""
    if isinstance(x, (_lazy_ndarray, np.ndarray)):
        return x
    return np.asarray(x)


def to_numpy(x: Any) -> np.ndarray:
    """The NumPy value of ``x`` (forcing a lazy array; waits)."""
    return np.asarray(x)


def add_replicas(values: Sequence[Any]) -> Any:
    """The sum of local replicas (in order), lazily when any of them is lazy."""
    total = values[0]
    if len(values) == 1:
        return total
    if any(is_lazy(v) for v in values) and not is_lazy(total):
        # a lazy sum: the first replica (a NumPy array) as a computed array of its own
        total = _lazy_ndarray._from_node(graph.leaf(np.array(total, order="C")))
    for v in values[1:]:
        total = total + v
    return total


class KeyClock:
    """The engine var that orders one key's pushes and pulls within this process."""

    __slots__ = ("var", "token")

    def __init__(self) -> None:
        self.var = engine.new_var()
        self.token = graph.leaf(np.empty(0, dtype=np.uint8))
        self.token.engine_var = self.var

    def wait(self) -> None:
        """Block until every push op of this key pushed so far has run."""
        engine.wait_for_var(self.var)


class Arrival:
    """A value that arrives later, from any thread: set once (``value`` or ``exc``; later
    sets are ignored), handed to the callbacks registered with :meth:`then`."""

    __slots__ = ("_lock", "_set", "_value", "_exc", "_callbacks")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._value: Any = None
        self._exc: BaseException | None = None
        self._callbacks: list[Callable[[Any, BaseException | None], None]] = []

    @property
    def is_set(self) -> bool:
        return self._set

    def set(self, value: Any, exc: BaseException | None = None) -> bool:
        """Deliver ``value`` (or ``exc``); False when something was delivered before."""
        with self._lock:
            if self._set:
                return False
            self._set, self._value, self._exc = True, value, exc
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(value, exc)
        return True

    def then(self, cb: Callable[[Any, BaseException | None], None]) -> None:
        """Call ``cb(value, exc)`` once delivered (now, if it was)."""
        with self._lock:
            if not self._set:
                self._callbacks.append(cb)
                return
        cb(self._value, self._exc)


def when_ready(value: Any, clock: KeyClock,
               start: Callable[[np.ndarray | None, BaseException | None,
                                Callable[[], None]], None],
               snapshot: bool, retained: bool) -> None:
    """Send ``value`` once it is computed: an engine operation, ordered on ``clock``, that
    calls ``start(numpy_value, None, done)`` (or ``start(None, exc, done)`` if computing
    the value failed) and completes when ``start`` calls ``done()``, from any thread (when
    the transfer is acknowledged).  ``start`` must not raise.

    Until then the operation keeps its read of the value's engine var and a reference to
    its node: a later write into the array (recorded, or run at once by the execution
    policy) waits or copies, and lazynp does not reuse the buffer, so a lazy value is sent
    from its own buffer, without a copy.

    Parameters
    ----------
    snapshot : bool
        The value is the caller's (not a fresh sum of replicas): a NumPy array, or a lazy
        array whose buffer the caller shares with NumPy, is copied at the call (it may be
        written right after the call, outside the engine's ordering).
    retained : bool
        The receiver keeps the array after ``done`` (the in-process store): a lazy value
        is copied too.
    """
    if not is_lazy(value):
        snap = buffers.copy(value) if snapshot else value
        engine.push_async(lambda done: start(snap, None, done), (), (clock.var,))
        return
    node = value._node()
    root = node.args[0] if node.op is graph.VIEW else node
    if snapshot and root.exported is True and root.state == graph.DONE:
        # a computed array whose buffer the caller shares with NumPy: snapshot it now, as a
        # NumPy array is (the caller may write through its NumPy alias right after the call)
        snap = buffers.copy(graph.materialize(node))
        engine.push_async(lambda done: start(snap, None, done), (), (clock.var,))
        return
    if node.state == graph.PENDING:
        graph.flush([node], wait=False)
    reads = (root.engine_var,) if root.engine_var is not None else ()

    def op(done: Callable[[], None]) -> None:
        try:
            v = graph.materialize(node)
            v = buffers.copy(v) if retained or not v.flags.c_contiguous else v
        except BaseException as exc:     # (stored for the key's next pull, not raised here)
            start(None, exc, done)
            return
        # ``node`` stays referenced by this closure until the engine drops the operation
        start(v, None, done)

    engine.push_async(op, reads, (clock.var,))


def arriving_value(shape: tuple[int, ...], dtype: np.dtype, arrival: Arrival
                   ) -> _lazy_ndarray:
    """A lazy array whose value is what ``arrival`` delivers (a C-contiguous NumPy array of
    ``shape`` and ``dtype`` that nothing else holds, or an exception).

    Its node is scheduled, written by an asynchronous engine operation that completes when
    the value arrives: reading the array, or running an operation that reads it, waits for
    it like for any pending value, and no engine thread waits meanwhile.  An exception is
    raised where the array (or something computed from it) is read.
    """
    node = graph.Node(PULL_OP, (), None, tuple(shape), np.dtype(dtype))
    node.state = graph.SCHEDULED
    node.engine_var = engine.new_var()

    def settle(done: Callable[[BaseException | None], None], value: Any,
               exc: BaseException | None) -> None:
        if exc is None:
            node.value = value
        else:
            node.error = exc
        node.state = graph.DONE
        done(exc)

    engine.push_async(lambda done: arrival.then(lambda v, e: settle(done, v, e)), (),
                      (node.engine_var,))
    return _lazy_ndarray._from_node(node)


def pending_value(shape: tuple[int, ...], dtype: np.dtype, clock: KeyClock,
                  produce: Callable[[], np.ndarray]) -> _lazy_ndarray:
    """A lazy array whose value is ``produce()``, run after ``clock``'s earlier pushes."""
    with _recorded():
        node = graph.record(PULL_OP, (clock.token,), {"produce": produce}, tuple(shape),
                            np.dtype(dtype))
    return _lazy_ndarray._from_node(node)


def write(out: Any, value: _lazy_ndarray, only: bool) -> None:
    """Make ``value`` (a private array: nothing else holds its buffer) the new contents of
    ``out``: lazily for a lazynp array, at once (waiting) for a NumPy one.

    A whole lazynp array that is the pull's only output gets ``value``'s node as the new
    version of its storage (what any write does, without the copy of a write into the old
    buffer); a view, or one of several outputs, gets ``out[...] = value``, recorded.  An
    array whose buffer the caller shares with NumPy (``asarray`` of a NumPy array, or given
    out by ``numpy.asarray``) is written in that buffer, at once (waiting for the value), as
    the policy does for every write into a shared buffer: the NumPy alias sees the pull.
    """
    if is_lazy(out):
        var = out._var
        if var.head.exported is True:
            out[...] = value
        elif only and out._geom is None and out.shape == value.shape and \
                out.dtype == value.dtype:
            var.set_head(value._node())
        else:
            with _recorded():
                out[...] = value
    else:
        np.copyto(out, np.asarray(value), casting="no")


def in_order(clock: KeyClock, fn: Callable[[], None]) -> None:
    """Run ``fn`` (which must not raise) as an engine op after the ops already ordered on
    ``clock`` and before later ones."""
    engine.push(fn, (), (clock.var,))

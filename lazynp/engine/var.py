"""Engine variables and the operation records queued on them."""

from __future__ import annotations

from collections import deque
from types import TracebackType
from typing import Callable

# A stored failure: the exception and its traceback as raised in the operation.
# The traceback is kept apart because each re-raise would otherwise append to it.
Failure = tuple[BaseException, TracebackType | None]

# Operation kinds.
NORMAL = 0
DELETE = 1  # runs even on a failed var; discards the failure
WAIT = 2  # internal marker pushed by wait_for_var; completed inline, never dispatched
WAIT_ABANDONED = 3  # a WAIT whose waiter was interrupted: must not eat the failure
# push_async: holds its grants after its body returned, until its done callback (below WAIT:
# it is dispatched like NORMAL)
ASYNC = -1


class EngineVar:
    """Opaque handle for one resource (typically one buffer).

    Every operation declares which vars it reads and writes; the engine orders
    operations through these handles only and never looks at the data.
    """

    __slots__ = ("_queue", "_busy", "_pending", "_failure", "_writer", "__weakref__")

    def __init__(self) -> None:
        # (op, is_write) entries not granted yet, in push order. Created lazily:
        # an empty deque costs ~760 bytes and most vars never queue anything.
        self._queue: deque[tuple[PushedOp, bool]] | None = None
        self._busy = 0  # > 0: number of running reads; -1: a write holds it; 0: free
        self._pending = 0  # unfinished ops (queued or running) that touch this var
        self._failure: Failure | None = None
        self._writer: PushedOp | None = None  # the op holding the write grant (threaded engine)

    def __repr__(self) -> str:
        state = "failed" if self._failure is not None else "ok"
        return f"<EngineVar pending={self._pending} {state} at {id(self):#x}>"


class PushedOp:
    """One pushed operation waiting for (or holding) its grants."""

    __slots__ = (
        "fn", "reads", "writes", "wait", "kind", "context", "device", "claim", "failure", "done",
        "complete",
    )

    def __init__(
        self,
        fn: Callable[[], object] | None,
        reads: tuple[EngineVar, ...],
        writes: tuple[EngineVar, ...],
        kind: int,
        context: str | None,
        device: str,
    ) -> None:
        self.fn = fn
        self.reads = reads
        self.writes = writes
        self.wait = 0  # grants still missing
        self.kind = kind
        self.context = context
        self.device = device
        # Whoever pops the token runs the op: list.pop() is atomic, so a worker
        # and a thread helping in wait_for_var never both run it.
        self.claim = [True]
        self.failure: Failure | None = None  # WAIT only: the failure handed to the waiter
        self.done = False  # WAIT and ASYNC only
        # ASYNC only (set by push_async, unset otherwise): the op's completion callback
        # self.complete: Callable[[BaseException | None], None]


def dedupe(
    reads: object, writes: object
) -> tuple[tuple[EngineVar, ...], tuple[EngineVar, ...]]:
    """Return ``(reads, writes)`` without duplicates; a var in both is a write."""
    if not writes:
        ws: tuple[EngineVar, ...] = ()
    elif len(writes) == 1:  # type: ignore[arg-type]
        ws = tuple(writes)  # type: ignore[arg-type]
    else:
        ws = tuple(dict.fromkeys(writes))  # type: ignore[arg-type]
    if not reads:
        return (), ws
    if len(reads) == 1 and not ws:  # type: ignore[arg-type]
        return tuple(reads), ws  # type: ignore[arg-type]
    seen = dict.fromkeys(ws)
    rs = []
    for v in reads:  # type: ignore[attr-defined]
        if v not in seen:
            seen[v] = None
            rs.append(v)
    return tuple(rs), ws


def run_body(op: PushedOp, catch: type[BaseException]) -> Failure | None:
    """Run ``op.fn`` unless one of its vars failed; return the failure to store.

    The caller must hold every grant of ``op`` (so nobody else touches the
    failure marks of its vars).
    """
    if op.kind == DELETE:
        for v in op.writes:
            v._failure = None
    else:
        for v in op.reads:
            if v._failure is not None:
                return v._failure
        for v in op.writes:
            if v._failure is not None:
                return v._failure
    fn = op.fn
    if fn is None:
        return None
    try:
        fn()
    except catch as exc:
        if op.context is not None:
            exc.add_note(f"lazynp: operation recorded at {op.context}")
        return (exc, exc.__traceback__)
    return None

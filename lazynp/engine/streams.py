"""The GPU engine: per device a few compute streams and one copy stream, events between them.

MXNet's engine on a GPU.  Work is *enqueued* on a stream (the host does not wait); a read
on stream B of what stream A wrote makes B wait on an event recorded on A after the write
(``stream.wait_event``), never on a host synchronize.  The host blocks only at forcing
points (:meth:`StreamEngine.host_wait`).

Two backends behind one interface:

* :class:`CupyBackend` (a real GPU): CuPy streams and events; Numba kernels are launched on
  the same streams through ``numba.cuda.external_stream``.
* :class:`SimBackend` (Numba's CUDA simulator, CI): streams are queues of Python callables
  that run only when the host waits, in a random interleaving of the streams that honours
  each stream's order and the events waited on.  A missing event between two streams then
  gives a wrong result or a deadlock error in the tests, as it would on a GPU.
"""
from __future__ import annotations

import collections
import os
import random
import threading


class SimEvent:
    __slots__ = ("stream", "done")

    def __init__(self, stream):
        self.stream = stream
        self.done = False


class SimStream:
    """A queue of pending work items: ``("run", fn)``, ``("record", event)``,
    ``("wait", event)``."""

    __slots__ = ("queue", "name")

    def __init__(self, name: str):
        self.queue = collections.deque()
        self.name = name

    def __repr__(self) -> str:
        return f"<sim stream {self.name}>"


#: the interleaving of simulated streams (tests reseed it)
SIM_RANDOM = random.Random(int(os.environ.get("LAZYNP_SIM_STREAM_SEED", "0")))
#: one host thread at a time runs queued work, for every simulated device: Numba's simulator
#: runs one kernel at a time (a second launch from another thread fails its assertion, or
#: runs as a device function in the first launch's context: wrong values), and a stream's
#: items must run one after the other
_SIM_RUN_LOCK = threading.RLock()


class SimBackend:
    """Deferred streams for Numba's CUDA simulator (every kernel runs on the host)."""

    def __init__(self):
        self.streams: list = []

    def new_stream(self, name: str):
        s = SimStream(name)
        self.streams.append(s)
        return s

    def enqueue(self, stream, fn) -> None:
        stream.queue.append(("run", fn))

    def record(self, stream) -> SimEvent:
        ev = SimEvent(stream)
        stream.queue.append(("record", ev))
        return ev

    def wait_event(self, stream, ev: SimEvent) -> None:
        stream.queue.append(("wait", ev))

    def query(self, ev: SimEvent) -> bool:
        return ev.done

    def synchronize(self, ev: SimEvent) -> None:
        """Run queued work, streams interleaved at random, until ``ev`` has happened."""
        with _SIM_RUN_LOCK:
            self._run_until(ev)

    def _run_until(self, ev: SimEvent) -> None:
        while not ev.done:
            ready = [s for s in self.streams if s.queue and
                     (s.queue[0][0] != "wait" or s.queue[0][1].done)]
            if not ready:
                raise RuntimeError("lazynp: GPU engine deadlock: a stream waits on an "
                                   "event that no stream will record")
            s = ready[SIM_RANDOM.randrange(len(ready))]
            kind, obj = s.queue.popleft()
            if kind == "run":
                obj()       # (work items store their own errors; they never raise)
            elif kind == "record":
                obj.done = True

    def synchronize_all(self) -> None:
        for s in self.streams:
            while s.queue:
                ev = self.record(s)
                self.synchronize(ev)


class CupyStream:
    """A CuPy stream and the Numba view of it (for kernel launches)."""

    __slots__ = ("cupy", "numba", "name")

    def __init__(self, cp_stream, nb_stream, name: str):
        self.cupy = cp_stream
        self.numba = nb_stream
        self.name = name


class CupyEvent:
    __slots__ = ("stream", "event")

    def __init__(self, stream, event):
        self.stream = stream
        self.event = event


class CupyBackend:
    """Streams and events of a real GPU (CuPy's), shared with Numba's launches."""

    def __init__(self, device_index: int):
        import cupy
        from numba import cuda
        self.cupy = cupy
        self.cuda = cuda
        self.index = device_index

    def new_stream(self, name: str):
        with self.cupy.cuda.Device(self.index):
            s = self.cupy.cuda.Stream(non_blocking=True)
        return CupyStream(s, self.cuda.external_stream(s.ptr), name)

    def enqueue(self, stream, fn) -> None:
        fn()        # (the work launches asynchronously on ``stream``)

    def record(self, stream) -> CupyEvent:
        ev = self.cupy.cuda.Event(block=False, disable_timing=True)
        ev.record(stream.cupy)
        return CupyEvent(stream, ev)

    def wait_event(self, stream, ev: CupyEvent) -> None:
        stream.cupy.wait_event(ev.event)

    def query(self, ev: CupyEvent) -> bool:
        return ev.event.done

    def synchronize(self, ev: CupyEvent) -> None:
        ev.event.synchronize()

    def synchronize_all(self) -> None:
        with self.cupy.cuda.Device(self.index):
            self.cupy.cuda.Device().synchronize()


STATS = {"gpu_launches": 0, "gpu_event_waits": 0, "gpu_host_waits": 0, "gpu_copies": 0}


class StreamEngine:
    """One device's streams.  ``launch(stream, fn, waits, keep)`` enqueues ``fn`` (which
    launches its work on ``stream``) after ``stream`` waits on the events ``waits``
    recorded on other streams, and returns the event recorded after it.  ``keep``: objects
    (buffers) held until that event has happened, so memory is never reused while a kernel
    on another stream still reads it."""

    def __init__(self, backend, n_compute: int = 4):
        self.backend = backend
        self.compute = [backend.new_stream(f"compute{i}") for i in range(n_compute)]
        self.copy = backend.new_stream("copy")
        self._next = 0
        self._held = collections.deque()

    def next_compute_stream(self):
        """Round robin over the compute streams (independent work overlaps)."""
        self._next = (self._next + 1) % len(self.compute)
        return self.compute[self._next]

    def launch(self, stream, fn, waits=(), keep=()):
        b = self.backend
        seen = set()
        for ev in waits:
            if ev is None or ev.stream is stream or id(ev) in seen or b.query(ev):
                continue
            seen.add(id(ev))
            b.wait_event(stream, ev)
            STATS["gpu_event_waits"] += 1
        b.enqueue(stream, fn)
        STATS["gpu_launches"] += 1
        ev = b.record(stream)
        if keep:
            self._held.append((ev, keep))
        self._release_done()
        return ev

    def _release_done(self) -> None:
        held = self._held
        q = self.backend.query
        while held and q(held[0][0]):
            held.popleft()

    def host_wait(self, ev) -> None:
        """Block the host until ``ev`` happened (a forcing point)."""
        if ev is not None and not self.backend.query(ev):
            STATS["gpu_host_waits"] += 1
            self.backend.synchronize(ev)
        self._release_done()

    def synchronize(self) -> None:
        """Block until everything enqueued on this device has run."""
        self.backend.synchronize_all()
        self._held.clear()

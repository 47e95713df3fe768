"""KVStore on dask.distributed: transfer throughput, training epoch time, overlap.

1. Push+pull throughput of 4 MiB and 64 MiB float32 arrays through a ``dist_sync`` KVStore
   (one server process) against a bare dask actor round trip of the same bytes (an actor
   that stores the array and returns it), both driven from a worker process (rank 0 of
   ``run_workers``), so that the arrays cross between two worker processes.  Interleaved
   repetitions, medians.  Goal: >= 0.8x the bare actor.  The KVStore figure is the API as a
   training loop uses it: push a lazynp array (a gradient: sent from its own buffer, which
   the push holds until the server acknowledges), pull into a lazynp array (the pulled
   value becomes its contents), wait for it (``lazynp.evaluate``, as reading it in lazynp
   code does).  Also shown: the push of a NumPy array, which is copied at the call (the
   caller may change it as soon as ``push`` returns).  Not ``numpy.asarray(out)``: that gives ``out``'s buffer to
   NumPy for good, and a pull into a shared buffer is written at once, with a copy, so
   that the NumPy alias sees it (the execution policy's rule for shared buffers).
2. Epoch time of ``python -m lazynp train`` (the MLP on digits) with 1 and 2 workers.
3. Overlap of communication with the backward pass: in one rank, a 4-layer MLP's backward
   pass alone (lazy gradients forced), push+pull of the same gradients alone, and a step that
   pushes each gradient as soon as it is computed (last layer first) and pulls them all.
   ``saved = compute + comm - step`` is the step time the overlap saves.  The steps are also
   traced (``kv.push_trace``: when each gradient was ready and its push acknowledged): the
   push time hidden behind compute is the time some push is in flight before the backward
   pass's last gradient is ready, drawn for one step as a text figure.
   The gradient replay of ``lazynp.grad`` is turned off in that rank (it computes the whole
   gradient at the call, leaving nothing to overlap).
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy

from _common import fmt_time, header, parse_args, print_table, Summary

import lazynp
from lazynp import kvstore


class BareActor:
    """The baseline: an actor that keeps the last array it was given and returns it."""

    def __init__(self) -> None:
        self.x = None

    async def put(self, x):
        self.x = x

    async def get(self):
        return self.x


def _throughput_rank(kv, rank, bare, sizes, repeat):
    """In a worker process: interleaved push+pull timings, KVStore vs bare actor."""
    import gc
    import statistics as st
    import time as tm

    import numpy as nu

    import lazynp as lnp
    out = {}
    for n in sizes:
        x = nu.random.default_rng(0).standard_normal(n).astype(nu.float32)
        key = f"k{n}"
        kv.init(key, nu.zeros(n, nu.float32))
        o = lnp.empty(n, dtype=nu.float32)
        xl = lnp.array(x)            # a lazynp-owned array, as a gradient is

        def via_kv():
            kv.push(key, xl)
            kv.pull(key, out=o)
            lnp.evaluate(o)
            return o

        def via_kv_numpy():
            kv.push(key, x)          # (copied at the call: the caller owns x)
            kv.pull(key, out=o)
            lnp.evaluate(o)
            return o

        def via_actor():
            bare.put(x).result()
            return bare.get().result()

        assert nu.array_equal(via_kv().copy(), x) and nu.array_equal(via_actor(), x)
        assert nu.array_equal(via_kv_numpy().copy(), x)
        samples = {"kv": [], "kv_numpy": [], "actor": []}
        for _ in range(repeat):
            for name, fn in (("kv", via_kv), ("actor", via_actor),
                             ("kv_numpy", via_kv_numpy)):
                gc.disable()
                t = tm.perf_counter()
                fn()
                samples[name].append(tm.perf_counter() - t)
                gc.enable()
        out[n] = {k: st.median(v) for k, v in samples.items()}
    return out


def throughput(num_servers: int, sizes: list[int], repeat: int) -> dict:
    with kvstore.create("dist_sync", num_servers=num_servers, workers=1, timeout=120) as kv:
        client = kv._client
        fut = client.submit(BareActor, actor=True, workers=[kv.servers[0].address],
                            allow_other_workers=False)
        with client.as_current():
            bare = fut.result(timeout=60)
        res = kvstore.run_workers(_throughput_rank, 1, kv, bare, sizes, repeat)[0]
        del bare, fut
    return res


def _overlap_rank(kv, rank, width, depth, batch, repeat):
    import gc
    import statistics as st
    import time as tm

    import numpy as nu

    import lazynp as lnp
    from lazynp._base import config as _config
    _config.GRAD_REPLAY = False           # lazy gradients: pushes can start before the end
    rng = nu.random.default_rng(0)
    keys = [f"w{i}" for i in range(depth)]
    p0 = {k: rng.standard_normal((width, width)) / nu.sqrt(width) for k in keys}
    kv.init(keys, [p0[k] for k in keys])
    X = lnp.asarray(rng.standard_normal((batch, width)))

    def loss(p, X):
        h = X
        for k in keys:
            h = lnp.tanh(h @ p[k])
        return lnp.sum(h * h) / batch

    g = lnp.grad(loss)
    params = {k: lnp.asarray(p0[k]) for k in keys}
    grads_np = {k: nu.asarray(v) for k, v in g(params, X).items()}

    def compute():
        lnp.evaluate(*g(params, X).values())

    def comm():
        for k in reversed(keys):
            kv.push(k, grads_np[k])
        outs = [kv.pull(k) for k in keys]
        lnp.evaluate(*outs)

    def step():
        gr = g(params, X)
        for k in reversed(keys):          # the last layer's gradient is ready first
            kv.push(k, gr[k])
        outs = [kv.pull(k) for k in keys]
        lnp.evaluate(*outs)

    for fn in (compute, comm, step):
        fn()
    samples = {"compute": [], "comm": [], "step": []}
    timelines = []
    for _ in range(repeat):
        for name, fn in (("compute", compute), ("comm", comm), ("step", step)):
            gc.disable()
            if name == "step":
                kv.push_trace = []
            t = tm.perf_counter()
            fn()
            t_end = tm.perf_counter()
            samples[name].append(t_end - t)
            if name == "step":
                timelines.append((t, t_end, kv.push_trace))
                kv.push_trace = None
            gc.enable()
    out = {k: st.median(v) for k, v in samples.items()}
    out["timelines"] = timelines
    return out


def hidden_pushes(t0: float, trace: list) -> tuple[float, float, float]:
    """``(backward_end, pushes_in_flight, pushes_hidden)`` of one traced step, in seconds
    from its start: the backward pass ends when its last gradient is ready (the push of it
    starts then); a push is in flight from its gradient being ready to its acknowledgement;
    the hidden part is the time some push is in flight before the backward pass ends
    (unions of intervals, so concurrent pushes are not counted twice)."""
    end = max(r for _, r, _ in trace) - t0
    spans = sorted((r - t0, a - t0) for _, r, a in trace)
    in_flight = hidden = 0.0
    cur_s, cur_e = None, None
    for s_, e_ in spans + [(float("inf"), float("inf"))]:
        if cur_e is None or s_ > cur_e:
            if cur_e is not None:
                in_flight += cur_e - cur_s
                hidden += max(0.0, min(cur_e, end) - cur_s)
            cur_s, cur_e = s_, e_
        else:
            cur_e = max(cur_e, e_)
    return end, in_flight, hidden


def draw_timeline(t0: float, t1: float, trace: list, width: int = 60) -> list[str]:
    """Text figure of one step: the backward pass (until its last gradient is ready) and
    each push in flight (gradient ready -> acknowledged)."""
    span = t1 - t0
    col = lambda t: min(width - 1, max(0, int((t - t0) / span * width)))   # noqa: E731
    end = max(r for _, r, _ in trace)
    lines = [f"{'':10s}0{'':{width - 2}s}{span * 1e3:.0f} ms",
             f"{'backward':10s}" + "=" * (col(end) + 1) + "|" + " " * (width - col(end) - 2)]
    for key, r, a in sorted(trace, key=lambda x: x[1]):
        a0, a1 = col(r), col(a)
        row = [" "] * width
        for i in range(a0, a1 + 1):
            row[i] = "#" if (t0 + (i + 0.5) * span / width) <= end else "+"
        lines.append(f"{'push ' + str(key):10s}" + "".join(row))
    lines.append(f"{'':10s}(# = push in flight while the backward pass still computes, "
                 f"+ = after it)")
    return lines


def overlap(width: int, depth: int, batch: int, repeat: int) -> dict:
    with kvstore.create("dist_sync", num_servers=1, workers=1, timeout=120) as kv:
        return kvstore.run_workers(_overlap_rank, 1, kv, width, depth, batch, repeat)[0]


def epoch_times(workers: int, epochs: int) -> list[float]:
    from lazynp.tools import train as _train
    res = _train.train(workers=workers, epochs=epochs, progress=False, timeout=120)
    return res.epoch_times


def main(argv=None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv)
    summary = Summary()
    sizes = [1 << 20, 1 << 24]                 # float32: 4 MiB and 64 MiB
    repeat = args.repeat(15, 3)

    header("1. push+pull throughput: KVStore vs a bare dask actor (worker -> server process)")
    rows = []
    for servers in (1, 2):
        res = throughput(servers, sizes, repeat)
        for n in sizes:
            mb = 4 * n / 2**20
            a_t = res[n]["actor"]
            for variant, label in (("kv", "lazynp array"), ("kv_numpy", "NumPy array")):
                kv_t = res[n][variant]
                ratio = a_t / kv_t
                rows.append([f"{mb:.0f} MiB, {servers} server(s), push of a {label}",
                             fmt_time(kv_t), fmt_time(a_t), f"{2 * mb / kv_t:.0f} MiB/s",
                             f"{2 * mb / a_t:.0f} MiB/s", f"{ratio:.2f}x"])
                what = f"push+pull {mb:.0f} MiB ({label})"
                if servers == 1 and variant == "kv":
                    summary.add(f"{what} vs bare actor", ">= 0.80x",
                                f"{ratio:.2f}x ({2 * mb / kv_t:.0f} vs {2 * mb / a_t:.0f} "
                                f"MiB/s)", ratio >= 0.8)
                elif servers == 1:
                    summary.add(f"{what} vs bare actor", "", f"{ratio:.2f}x (copied at the "
                                f"call)", True, kind="info")
                elif variant == "kv":
                    summary.add(f"{what}, key split over 2 servers", "",
                                f"{ratio:.2f}x the bare actor (one process)", True,
                                kind="info")
    print_table(rows, ["array", "KVStore", "bare actor", "KVStore rate", "actor rate",
                       "KVStore speed / actor"])

    header("2. epoch time of the training example (digits MLP, dist_sync)")
    epochs = args.repeat(4, 2)
    rows = []
    med = {}
    for w in (1, 2):
        times = epoch_times(w, epochs)
        med[w] = statistics.median(times[1:])      # the first epoch includes start-up
        rows.append([f"{w} worker(s)", fmt_time(times[0]), fmt_time(med[w]),
                     " ".join(f"{t:.2f}" for t in times)])
    print_table(rows, ["run", "first epoch", "later epochs (median)", "all epochs (s)"])
    for w in (1, 2):
        summary.add(f"epoch time, {w} worker(s)", "", fmt_time(med[w]), True, kind="info")

    header("3. overlap of pushes with the backward pass (4 x 1024x1024 float64 layers)")
    width, depth, batch = (1024, 4, 256) if not args.quick else (512, 4, 128)
    ov = overlap(width, depth, batch, args.repeat(9, 3))
    hidden = ov["compute"] + ov["comm"] - ov["step"]
    frac = hidden / ov["comm"]
    traced = [(t0, t1, tr) + hidden_pushes(t0, tr) for t0, t1, tr in ov["timelines"] if tr]
    traced.sort(key=lambda x: x[5])
    mid = traced[len(traced) // 2]          # the step with the median hidden push time
    h_med = statistics.median(x[5] for x in traced)
    f_med = statistics.median(x[5] / x[4] for x in traced if x[4] > 0)
    print_table([[fmt_time(ov["compute"]), fmt_time(ov["comm"]), fmt_time(ov["step"]),
                  fmt_time(hidden), f"{100 * frac:.0f}%",
                  fmt_time(h_med), f"{100 * f_med:.0f}%"]],
                ["backward alone", "push+pull alone", "step (overlapped)",
                 "saved (alone - step)", "of push+pull",
                 "pushes hidden (traced)", "of push time"])
    print()
    print("one step (the one with the median hidden push time):")
    for line in draw_timeline(mid[0], mid[1], mid[2]):
        print("  " + line)
    summary.add("push time hidden behind the backward pass (traced, median of steps)", "",
                f"{fmt_time(h_med)} ({100 * f_med:.0f}% of push time)", True, kind="info")
    summary.add("step time saved by overlap (backward + push/pull alone - step)", "",
                f"{fmt_time(hidden)} ({100 * frac:.0f}% of push+pull)", True, kind="info")
    return summary.print(strict=args.strict)


if __name__ == "__main__":
    sys.exit(main())

"""lazynp on a GPU: fused Numba CUDA kernels on the stream engine, against CuPy and PyTorch.

One run prints, each peer in the same run (skipped with a note when not importable):

* W1 ``a*b + c*d - e*0.5`` and W2 ``sum(a*b + c)`` on 10^8 float32 elements: lazynp fused,
  CuPy eager, ``cupy.fuse``, PyTorch eager; achieved bandwidth as a percentage of a
  device-to-device copy measured in the same run;
* row softmax of an 8192 x 8192 float32 matrix;
* two independent chains of layers ``tanh(x @ w)`` (1024 x 1024 float32) on the engine's
  streams against the same work on one stream (overlap);
* the MLP training step of ``benchmarks/autodiff.py`` (784-256-10, batch 256, float32) on the
  GPU: ``lazynp.grad`` of the loss and an SGD update, against PyTorch's autograd step.

Targets (issue 13): W1 >= 80% of copy bandwidth and >= 2.5x CuPy eager; two streams <= 0.75x
the one-stream time; MLP step <= 1.5x PyTorch's time.

On the GPU machine (no internet) lazynp is installed from this checkout without downloads
(``pip install --no-build-isolation --no-deps -e .``, done by this script when its compiled
part is missing).  ``--smoke`` runs every section once on tiny sizes: it works under Numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which CI uses to keep this script working.
Finishes in well under 5 minutes on one GPU.

``--host-cost`` measures only lazynp's host path (issue 38's targets: <= 15 us per recorded
device op, <= 50 us per ``evaluate``), with every generated kernel's launch replaced by a
no-op, so that it runs without a GPU under the simulator (``NUMBA_ENABLE_CUDASIM=1``; it
sets it) and the simulated kernels' Python threads are not timed.  What a GPU adds on top:
Numba's launch of each kernel (argument packing, ``cuLaunchKernel``) and CuPy's event
calls, which the simulator stands in for with its own queues.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ensure_installed(smoke: bool) -> None:
    """Install lazynp from this checkout (no downloads) unless its C part is importable."""
    if smoke:
        return
    try:
        import lazynp._base._speedups  # noqa: F401
        return
    except ImportError:
        pass
    print("installing lazynp from", ROOT, "(pip install --no-build-isolation --no-deps -e .)")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                    "--no-deps", "-e", ROOT], check=False)


import numpy  # noqa: E402

from _common import Summary, fmt_time, header, make_parser, parse_args, print_table  # noqa: E402


def _optional(name: str):
    try:
        return __import__(name)
    except Exception:
        return None


class Peers:
    """CuPy and PyTorch on the GPU when importable (and a GPU is there)."""

    def __init__(self, sim: bool):
        self.cp = None if sim else _optional("cupy")
        torch = None if sim else _optional("torch")
        self.torch = torch if torch is not None and torch.cuda.is_available() else None

    def sync(self) -> None:
        if self.cp is not None:
            self.cp.cuda.Device().synchronize()
        if self.torch is not None:
            self.torch.cuda.synchronize()


def bench(fn, sync, repeat: int, warmup: int = 2) -> float:
    """Median seconds of ``fn(); sync()``."""
    for _ in range(warmup):
        fn()
        sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _row(name: str, t: float, base: float | None, bytes_moved: float | None, copy_bw):
    bw = "" if bytes_moved is None else f"{bytes_moved / t / 1e9:.0f} GB/s"
    pct = "" if bytes_moved is None or not copy_bw else \
        f"{100 * bytes_moved / t / copy_bw:.0f}%"
    ratio = "" if base is None else f"{t / base:.2f}x"
    return (name, fmt_time(t), ratio, bw, pct)


def _load_average() -> str:
    try:
        one, five, _ = os.getloadavg()
        return f"load average {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} CPUs"
    except OSError:
        return "load average unknown"


def host_cost(args) -> int:
    """Host time per recorded device op and per ``evaluate`` with no-op kernels (the
    simulator's host path): W1 ``a*b + c*d - e*0.5`` (5 recorded ops, one fused kernel) on
    1024 float32 elements, median of many rounds."""
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    import lazynp as lnp
    from lazynp.cuda import codegen, memory
    if not memory.simulated():
        print("--host-cost runs under the simulator (NUMBA_ENABLE_CUDASIM=1 before numba.cuda "
              "is imported)")
        return 2
    codegen.QuietLaunch.__getitem__ = lambda self, config: _no_op_kernel
    rounds = args.repeat(3000, 300)
    rng = numpy.random.default_rng(0)
    a, b, c, d, e = [lnp.asarray(rng.standard_normal(1024).astype(numpy.float32),
                                 device="cuda") for _ in range(5)]

    def record():
        return a * b + c * d - e * 0.5

    for _ in range(50):                     # (kernels generated, caches warm)
        lnp.evaluate(record())
    per_op, per_eval, cpu_eval = [], [], []
    clock, cpu = time.perf_counter, time.thread_time
    for _ in range(rounds):
        t0 = clock()
        r = record()
        t1 = clock()
        c1 = cpu()
        lnp.evaluate(r)
        c2 = cpu()
        t2 = clock()
        per_op.append((t1 - t0) / 5)
        per_eval.append(t2 - t1)
        cpu_eval.append(c2 - c1)
    op_us = statistics.median(per_op) * 1e6
    eval_us = statistics.median(per_eval) * 1e6
    eval_cpu_us = statistics.median(cpu_eval) * 1e6
    planned = lnp.jit(lambda a, b, c, d, e: a * b + c * d - e * 0.5)
    for _ in range(50):
        lnp.evaluate(planned(a, b, c, d, e))
    per_call = []
    for _ in range(rounds):
        t0 = clock()
        lnp.evaluate(planned(a, b, c, d, e))
        per_call.append(clock() - t0)
    jit_us = statistics.median(per_call) * 1e6
    header("host cost per device op and per evaluate (no-op kernels, Numba CUDA simulator)")
    print(f"W1 a*b + c*d - e*0.5, 1024 float32, median of {rounds} rounds; "
          f"{_load_average()}")
    print_table([("record one device op", f"{op_us:.1f} us", "<= 15 us"),
                 ("evaluate (flush, fuse, launch, wait)", f"{eval_us:.1f} us", "<= 50 us"),
                 ("  the same, this thread's CPU time (less sensitive to a loaded machine)",
                  f"{eval_cpu_us:.1f} us", ""),
                 ("jit call + evaluate (a replayed plan: 5 copies in, 1 kernel, 1 copy out)",
                  f"{jit_us:.1f} us", "")],
                ("host path", "median", "target"))
    summary = Summary()
    summary.add("host cost per recorded device op", "<= 15 us", f"{op_us:.1f} us",
                op_us <= 15, "time")
    summary.add("host cost per evaluate", "<= 50 us", f"{eval_us:.1f} us", eval_us <= 50,
                "time")
    return summary.print(strict=args.strict)


def _no_op_kernel(*args) -> None:
    pass


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--smoke", action="store_true",
                        help="every section once on tiny sizes (works on the simulator)")
    parser.add_argument("--host-cost", action="store_true",
                        help="host time per recorded op and per evaluate, no-op kernels, "
                             "on the simulator (no GPU needed)")
    args = parse_args(__doc__, parser=parser)
    if args.host_cost:
        return host_cost(args)
    smoke = args.smoke
    _ensure_installed(smoke)
    import lazynp as lnp
    from lazynp.cuda import memory, runtime
    sim = memory.simulated()
    peers = Peers(sim)
    rng = numpy.random.default_rng(0)
    repeat = 1 if smoke else args.repeat(10, 3)
    warm = 0 if smoke else 2
    summary = Summary()
    # (the simulator's timings mean nothing: its rows are information only)
    kind = "info" if sim else "time"
    print(f"lazynp on {'Numba CUDA simulator' if sim else 'CUDA device 0'}; CuPy: "
          f"{'yes' if peers.cp else 'no'}; PyTorch: {'yes' if peers.torch else 'no'}")

    def lz_sync():
        runtime.synchronize()

    def sync_all():
        lz_sync()
        peers.sync()

    # --- W1 and W2 ---------------------------------------------------------------------------
    n = 64 if smoke else args.size(10 ** 8, 10 ** 7)
    header(f"W1 a*b + c*d - e*0.5 and W2 sum(a*b + c), {n:,} float32")
    cp = peers.cp
    if cp is not None:
        host = None
        cps = [cp.random.standard_normal(n, dtype=cp.float32) for _ in range(5)]
        lz = [lnp.asarray(x, device="cuda") for x in cps]         # shared, no copy
    else:
        host = [rng.standard_normal(n).astype(numpy.float32) for _ in range(5)]
        lz = [lnp.asarray(x, device="cuda") for x in host]
    a, b, c, d, e = lz

    def w1_lz():
        lnp.evaluate(a * b + c * d - e * 0.5)

    def w2_lz():
        lnp.evaluate((a * b + c).sum())

    check = numpy.asarray(a * b + c * d - e * 0.5)
    hv = [numpy.asarray(x) for x in lz]
    numpy.testing.assert_allclose(check, hv[0] * hv[1] + hv[2] * hv[3] - hv[4] * 0.5,
                                  rtol=1e-5, atol=1e-5)
    s = float((a * b + c).sum())
    want = float((hv[0].astype(numpy.float64) * hv[1] + hv[2]).sum())
    assert abs(s - want) <= 1e-3 * max(1.0, abs(want)), (s, want)

    copy_bw = None
    rows1, rows2 = [], []
    t_w1 = bench(w1_lz, lz_sync, repeat, warm)
    t_w2 = bench(w2_lz, lz_sync, repeat, warm)
    t_cp1 = None
    if cp is not None:
        ca, cb, cc, cd, ce = cps
        dst = cp.empty_like(ca)
        t_copy = bench(lambda: cp.copyto(dst, ca), peers.sync, repeat, warm)
        copy_bw = 8 * n / t_copy
        rows1.append(("device-to-device copy", fmt_time(t_copy), "", f"{copy_bw / 1e9:.0f} GB/s",
                      "100%"))
        t_cp1 = bench(lambda: ca * cb + cc * cd - ce * 0.5, peers.sync, repeat, warm)
        fused1 = cp.fuse()(lambda a, b, c, d, e: a * b + c * d - e * 0.5)
        fused2 = cp.fuse()(lambda a, b, c: cp.sum(a * b + c))
        t_f1 = bench(lambda: fused1(ca, cb, cc, cd, ce), peers.sync, repeat, warm)
        t_cp2 = bench(lambda: (ca * cb + cc).sum(), peers.sync, repeat, warm)
        t_f2 = bench(lambda: fused2(ca, cb, cc), peers.sync, repeat, warm)
    rows1.append(_row("lazynp fused", t_w1, t_w1, 24 * n, copy_bw))
    rows2.append(_row("lazynp fused", t_w2, t_w2, 12 * n, copy_bw))
    if cp is not None:
        rows1 += [_row("CuPy eager", t_cp1, t_w1, 24 * n, copy_bw),
                  _row("cupy.fuse", t_f1, t_w1, 24 * n, copy_bw)]
        rows2 += [_row("CuPy eager", t_cp2, t_w2, 12 * n, copy_bw),
                  _row("cupy.fuse", t_f2, t_w2, 12 * n, copy_bw)]
    torch = peers.torch
    if torch is not None:
        ta, tb, tc, td, te = [torch.as_tensor(x, device="cuda") for x in cps] if cp is not None \
            else [torch.as_tensor(x).cuda() for x in host]
        rows1.append(_row("PyTorch eager", bench(lambda: ta * tb + tc * td - te * 0.5,
                                                 peers.sync, repeat, warm), t_w1, 24 * n, copy_bw))
        rows2.append(_row("PyTorch eager", bench(lambda: (ta * tb + tc).sum(), peers.sync, repeat,
                                                 warm), t_w2, 12 * n, copy_bw))
    heads = ("W1", "median", "vs lazynp", "bandwidth", "of copy")
    print_table(rows1, heads)
    print()
    print_table(rows2, ("W2",) + heads[1:])
    if copy_bw:
        pct = 24 * n / t_w1 / copy_bw
        summary.add("W1 bandwidth", ">= 80% of copy", f"{100 * pct:.0f}%", pct >= 0.8, kind)
        summary.add("W1 vs CuPy eager", ">= 2.5x", f"{t_cp1 / t_w1:.2f}x", t_cp1 / t_w1 >= 2.5,
                    kind)
    else:
        print("(CuPy not importable: no copy bandwidth, no CuPy rows)")
    del a, b, c, d, e, lz
    if cp is not None:
        del cps, ca, cb, cc, cd, ce, dst
        cp.get_default_memory_pool().free_all_blocks()

    # --- softmax --------------------------------------------------------------------------------
    rows, cols = (8, 16) if smoke else (8192, 8192)
    header(f"row softmax, {rows} x {cols} float32")
    xs = rng.standard_normal((rows, cols)).astype(numpy.float32)
    x = lnp.asarray(xs, device="cuda")

    def softmax_lz():
        ex = lnp.exp(x - x.max(axis=1, keepdims=True))
        lnp.evaluate(ex / ex.sum(axis=1, keepdims=True))

    ex = lnp.exp(x - x.max(axis=1, keepdims=True))
    got = numpy.asarray(ex / ex.sum(axis=1, keepdims=True))
    e2 = numpy.exp(xs - xs.max(axis=1, keepdims=True))
    numpy.testing.assert_allclose(got, e2 / e2.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-7)
    t_sm = bench(softmax_lz, lz_sync, repeat, warm)
    table = [("lazynp fused", fmt_time(t_sm), "1.00x")]
    if cp is not None:
        cx = cp.asarray(xs)

        def softmax_cp():
            ce_ = cp.exp(cx - cx.max(axis=1, keepdims=True))
            return ce_ / ce_.sum(axis=1, keepdims=True)
        t = bench(softmax_cp, peers.sync, repeat, warm)
        table.append(("CuPy eager", fmt_time(t), f"{t / t_sm:.2f}x"))
    if torch is not None:
        tx = torch.as_tensor(xs).cuda()
        t = bench(lambda: torch.softmax(tx, dim=1), peers.sync, repeat, warm)
        table.append(("PyTorch softmax", fmt_time(t), f"{t / t_sm:.2f}x"))
    print_table(table, ("softmax", "median", "vs lazynp"))
    del x

    # --- two streams vs one -----------------------------------------------------------------------
    # Two independent chains of layers x = tanh(x @ w): a 1024 x 1024 float32 matmul (cuBLAS
    # through CuPy) fills about half of a large GPU, so the other chain's can run beside it.
    m = 8 if smoke else 1024
    steps = 2 if smoke else 10
    header(f"two independent chains of {steps} layers tanh(x @ w), {m} x {m} float32: "
           f"two streams vs one")
    w0 = lnp.asarray((rng.standard_normal((m, m)) / m ** 0.5).astype(numpy.float32),
                     device="cuda")
    u0 = lnp.asarray(rng.standard_normal((m, m)).astype(numpy.float32), device="cuda")
    v0 = lnp.asarray(rng.standard_normal((m, m)).astype(numpy.float32), device="cuda")

    def chain(x):
        for _ in range(steps):
            x = lnp.tanh(x @ w0)
        return x

    eng = runtime.engine_for(u0.device)
    all_streams = list(eng.compute)

    def two_chains():
        p, q = chain(u0), chain(v0)
        lnp.evaluate(p, q)

    t_two = bench(two_chains, lz_sync, repeat, warm)
    eng.compute = all_streams[:1]
    try:
        t_one = bench(two_chains, lz_sync, repeat, warm)
    finally:
        eng.compute = all_streams
    print_table([("one stream", fmt_time(t_one), "1.00x"),
                 (f"{len(all_streams)} streams", fmt_time(t_two), f"{t_two / t_one:.2f}x")],
                ("chains", "median", "vs one stream"))
    summary.add("two streams vs one", "<= 0.75x", f"{t_two / t_one:.2f}x", t_two / t_one <= 0.75,
                kind)

    # --- MLP training step ------------------------------------------------------------------------
    B, D, H, C = (8, 16, 8, 4) if smoke else (256, 784, 256, 10)
    header(f"MLP training step ({D}-{H}-{C}, batch {B}, float32, SGD)")
    Xh = rng.standard_normal((B, D)).astype(numpy.float32)
    Yh = numpy.eye(C, dtype=numpy.float32)[rng.integers(0, C, B)]
    P0 = [(rng.standard_normal((D, H)) * 0.05).astype(numpy.float32),
          numpy.zeros(H, numpy.float32),
          (rng.standard_normal((H, C)) * 0.05).astype(numpy.float32),
          numpy.zeros(C, numpy.float32)]
    lr = 0.01
    X, Y = lnp.asarray(Xh, device="cuda"), lnp.asarray(Yh, device="cuda")
    params = [lnp.asarray(p, device="cuda") for p in P0]

    def loss(W1, b1, W2, b2, X, Y):
        h = lnp.tanh(X @ W1 + b1)
        logits = h @ W2 + b2
        m = lnp.max(logits, axis=1, keepdims=True)
        lse = lnp.log(lnp.sum(lnp.exp(logits - m), axis=1, keepdims=True)) + m
        return -lnp.sum(Y * (logits - lse)) / X.shape[0]

    grad_lz = lnp.grad(loss, argnums=(0, 1, 2, 3))

    def step_lz():
        for w, gr in zip(params, grad_lz(*params, X, Y)):
            w -= lr * gr
        lnp.evaluate(*params)

    t_mlp = bench(step_lz, lz_sync, repeat, warm)
    table = [("lazynp grad + SGD", fmt_time(t_mlp), "1.00x")]

    @lnp.jit
    def step_planned(W1, b1, W2, b2, X, Y):
        grads = grad_lz(W1, b1, W2, b2, X, Y)
        return tuple(w - lr * gr for w, gr in zip((W1, b1, W2, b2), grads))

    jparams = [lnp.asarray(p, device="cuda") for p in P0]
    check = step_planned(*jparams, X, Y)
    want = [w - lr * g for w, g in zip(jparams, grad_lz(*jparams, X, Y))]
    for got, ref in zip(check, want):
        numpy.testing.assert_allclose(numpy.asarray(got), numpy.asarray(ref), rtol=1e-4,
                                      atol=1e-6)

    def step_jit():
        jparams[:] = step_planned(*jparams, X, Y)
        lnp.evaluate(*jparams)

    t_jit = bench(step_jit, lz_sync, repeat, warm)
    table.append(("lazynp jit(grad + SGD)", fmt_time(t_jit), f"{t_jit / t_mlp:.2f}x"))
    if torch is not None:
        tp = [torch.tensor(p, device="cuda", requires_grad=True) for p in P0]
        tX, tY = torch.as_tensor(Xh).cuda(), torch.as_tensor(Yh).cuda()

        def step_torch():
            W1, b1, W2, b2 = tp
            h = torch.tanh(tX @ W1 + b1)
            logits = h @ W2 + b2
            loss = -(tY * torch.log_softmax(logits, dim=1)).sum() / B
            loss.backward()
            with torch.no_grad():
                for w in tp:
                    w -= lr * w.grad
                    w.grad = None
        t_t = bench(step_torch, peers.sync, repeat, warm)
        table.append(("PyTorch autograd", fmt_time(t_t), f"{t_t / t_mlp:.2f}x"))
        summary.add("MLP step vs PyTorch", "<= 1.5x", f"{t_mlp / t_t:.2f}x", t_mlp / t_t <= 1.5,
                    kind)
        summary.add("MLP step (jit) vs PyTorch", "<= 1.5x", f"{t_jit / t_t:.2f}x",
                    t_jit / t_t <= 1.5, kind)
    print_table(table, ("MLP step", "median", "vs lazynp"))

    print(f"\nlazynp device counters: {runtime.STATS}")
    return summary.print(strict=args.strict)


if __name__ == "__main__":
    sys.exit(main())

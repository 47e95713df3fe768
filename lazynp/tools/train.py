"""``python -m lazynp train``: data-parallel training of an MLP through the KVStore.

A two-layer NumPy-style MLP (``tanh`` hidden layer, softmax output) is trained on
scikit-learn's bundled digits data (8x8 images, 10 classes; synthetic data of the same shape
when scikit-learn is absent; nothing is downloaded).  Every worker rank runs
:func:`rank_train` on a dask worker: each step it takes its shard of the global batch,
computes ``lazynp.value_and_grad`` of the loss, pushes each gradient (last layer first, so
the pushes start while the rest of the backward pass still runs) and pulls the new weights
into its parameter arrays, which the next step's forward pass then waits for.  The servers
run SGD with momentum.  In ``sync`` mode one step is one server round: the result equals
single-process training on the whole batch.  After every epoch the ranks meet at a barrier,
rank 0 writes a checkpoint (server state with the optimizer's, plus the epoch), and
``resume`` continues from one: epochs depend only on the seed and their number, so a resumed
run gives the same result as an uninterrupted one.
"""
from __future__ import annotations

import math
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy

import lazynp as np
from lazynp import kvstore

KEYS = ("w1", "b1", "w2", "b2")


@dataclass
class TrainConfig:
    """What every rank needs to train (picklable)."""

    epochs: int = 5
    start_epoch: int = 0
    batch_size: int = 64
    hidden: int = 64
    learning_rate: float = 0.1
    momentum: float = 0.9
    seed: int = 0
    max_steps: int | None = None        # stop after this many steps in all (tests)
    checkpoint: str | None = None
    step_hook: Callable[[int, int, int], None] | None = None   # fault injection (tests)
    report_steps: bool = True


@dataclass
class TrainResult:
    """What :func:`train` returns."""

    params: dict[str, numpy.ndarray]
    history: list[dict[str, float]] = field(default_factory=list)
    epoch_times: list[float] = field(default_factory=list)
    data: str = ""


def load_data(seed: int = 0) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray,
                                      numpy.ndarray, str]:
    """``(X_train, y_train, X_test, y_test, source)``: digits scaled to [0, 1], 80/20 split
    (synthetic Gaussian blobs of the same shape without scikit-learn)."""
    try:
        from sklearn.datasets import load_digits
        d = load_digits()
        X, y, source = d.data / 16.0, d.target.astype(numpy.int64), "digits"
    except ImportError:
        rng = numpy.random.default_rng(1234)
        centers = rng.standard_normal((10, 64))
        y = rng.integers(0, 10, 1797)
        X, source = centers[y] + 0.8 * rng.standard_normal((1797, 64)), "synthetic"
    perm = numpy.random.default_rng(seed).permutation(len(y))
    X, y = X[perm], y[perm]
    n = int(0.8 * len(y))
    return X[:n], y[:n], X[n:], y[n:], source


def init_params(n_in: int, hidden: int, n_out: int, seed: int) -> dict[str, numpy.ndarray]:
    rng = numpy.random.default_rng(seed)
    return {"w1": rng.standard_normal((n_in, hidden)) / math.sqrt(n_in),
            "b1": numpy.zeros(hidden),
            "w2": rng.standard_normal((hidden, n_out)) / math.sqrt(hidden),
            "b2": numpy.zeros(n_out)}


def logits(params: dict, X: Any) -> Any:
    h = np.tanh(X @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def loss(params: dict, X: Any, Y: Any) -> Any:
    """Mean cross-entropy of the softmax of the logits against one-hot ``Y``; the logits
    come back as auxiliary output (for the accuracy)."""
    z = logits(params, X)
    z = z - np.max(z, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.sum(logp * Y) / X.shape[0], z


def steps_per_epoch(n_train: int, batch_size: int) -> int:
    return n_train // batch_size


def epoch_batches(n_train: int, cfg: TrainConfig, epoch: int) -> numpy.ndarray:
    """Index rows of the global batches of ``epoch`` (depends only on the seed and epoch)."""
    perm = numpy.random.default_rng([cfg.seed, epoch]).permutation(n_train)
    n = steps_per_epoch(n_train, cfg.batch_size)
    return perm[:n * cfg.batch_size].reshape(n, cfg.batch_size)


def one_hot(y: numpy.ndarray, n: int = 10) -> numpy.ndarray:
    return numpy.eye(n)[y]


def rank_train(kv: kvstore.KVStore, rank: int, cfg: TrainConfig) -> dict[str, Any]:
    """One worker's training loop (run by ``kvstore.run_workers``)."""
    Xtr, ytr, Xte, yte, _ = load_data(cfg.seed)
    W = kv.num_workers
    shapes = init_params(Xtr.shape[1], cfg.hidden, 10, cfg.seed)
    params = {k: np.empty(shapes[k].shape) for k in KEYS}
    kv.pull(list(KEYS), out=[params[k] for k in KEYS])
    vg = np.value_and_grad(loss, has_aux=True)
    steps = 0
    history = []
    for epoch in range(cfg.start_epoch, cfg.epochs):
        batches = epoch_batches(len(ytr), cfg, epoch)
        loss_sum, correct, count = 0.0, 0, 0
        for step, idx in enumerate(batches):
            if cfg.max_steps is not None and steps >= cfg.max_steps:
                break
            if cfg.step_hook is not None:
                cfg.step_hook(rank, epoch, step)
            shard = idx[rank::W]          # this rank's part of the global batch
            X, y = Xtr[shard], ytr[shard]
            (value, z), grads = vg(params, np.asarray(X), np.asarray(one_hot(y)))
            for k in reversed(KEYS):      # last layer's gradient is ready first
                kv.push(k, grads[k])
            kv.pull(list(KEYS), out=[params[k] for k in KEYS])
            loss_sum += float(value) * len(shard)
            correct += int(numpy.sum(numpy.argmax(numpy.asarray(z), axis=1) == y))
            count += len(shard)
            steps += 1
            if cfg.report_steps and rank == 0:
                kv.report(("step", epoch, step + 1, len(batches)))
        kv.barrier()                      # every push of the epoch is in
        test_acc = float(numpy.mean(numpy.argmax(
            numpy.asarray(logits(params, np.asarray(Xte))), axis=1) == yte))
        if rank == 0 and cfg.checkpoint:
            kv.save(cfg.checkpoint, meta={"epoch": epoch + 1, "config": _meta_config(cfg)})
        kv.barrier()                      # nobody pushes before the checkpoint is written
        rec = {"epoch": epoch + 1, "loss_sum": loss_sum, "correct": correct,
               "count": count, "test_acc": test_acc}
        history.append(rec)
        kv.report(("epoch", rec))
        if cfg.max_steps is not None and steps >= cfg.max_steps:
            break
    return {"history": history,
            "params": {k: numpy.asarray(params[k]) for k in KEYS} if rank == 0 else None}


def _meta_config(cfg: TrainConfig) -> dict:
    d = asdict(cfg)
    for k in ("step_hook", "checkpoint", "start_epoch", "max_steps", "epochs",
              "report_steps"):
        d.pop(k)
    return d


class KillAt:
    """Fault injection: SIGKILL the worker process of ``rank`` before ``step`` of
    ``epoch`` (a picklable step hook for :class:`TrainConfig`).  With ``mark``, the
    moment of the kill (``time.monotonic()``, the same clock in every process of the
    machine) is written to that file first, so a test can bound the time from the loss to
    the error it causes."""

    def __init__(self, rank: int, epoch: int, step: int, mark: str | None = None) -> None:
        self.rank, self.epoch, self.step, self.mark = rank, epoch, step, mark

    def __call__(self, rank: int, epoch: int, step: int) -> None:
        if (rank, epoch, step) == (self.rank, self.epoch, self.step):
            kill_self(self.mark)


def kill_self(mark: str | None = None) -> None:
    """SIGKILL this process, after writing ``time.monotonic()`` to ``mark`` if given."""
    if mark is not None:
        with open(mark, "w") as f:
            f.write(repr(time.monotonic()))
            f.flush()
            os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def train(workers: int = 2, epochs: int = 5, mode: str = "sync", *, client: Any = None,
          scheduler: str | None = None, num_servers: int = 1, batch_size: int = 64,
          hidden: int = 64, learning_rate: float = 0.1, momentum: float = 0.9,
          seed: int = 0, checkpoint: str | None = None, resume: str | None = None,
          progress: bool = True, timeout: float = 60.0, max_steps: int | None = None,
          step_hook: Callable[[int, int, int], None] | None = None,
          out: Any = None) -> TrainResult:
    """Train the MLP with ``workers`` data-parallel ranks; see the module docstring.

    Parameters
    ----------
    workers : int
        Worker ranks (dask workers running :func:`rank_train`).
    epochs : int
        Train until this many epochs are done (counting those of a resumed checkpoint).
    mode : {"sync", "async"}
        ``dist_sync`` or ``dist_async`` store.
    client, scheduler
        A ``distributed.Client``, or a scheduler address; neither: an embedded cluster.
    checkpoint : str, optional
        Write a checkpoint here after every epoch.
    resume : str, optional
        Continue from this checkpoint (the model's configuration must match).
    progress : bool
        Show a tqdm progress bar per epoch and a loss/accuracy line per epoch.
    max_steps, step_hook
        Stop after ``max_steps`` steps; call ``step_hook(rank, epoch, step)`` before each
        step (fault injection: :class:`KillAt`).

    Raises
    ------
    lazynp.kvstore.KVStoreError
        A worker or server process was lost; resume from the last checkpoint.
    """
    if mode not in ("sync", "async"):
        raise ValueError(f"mode must be 'sync' or 'async', got {mode!r}")
    if batch_size % workers:
        raise ValueError(f"batch_size {batch_size} must be a multiple of workers {workers}")
    out = sys.stdout if out is None else out
    Xtr, ytr, _, _, source = load_data(seed)
    cfg = TrainConfig(epochs=epochs, batch_size=batch_size, hidden=hidden,
                      learning_rate=learning_rate, momentum=momentum, seed=seed,
                      max_steps=max_steps, checkpoint=checkpoint, step_hook=step_hook,
                      report_steps=progress)
    kind = "dist_sync" if mode == "sync" else "dist_async"
    result = TrainResult({}, data=source)
    with kvstore.create(kind, client=client if client is not None else scheduler,
                        num_servers=num_servers, workers=workers, timeout=timeout) as kv:
        if resume:
            meta = kv.load(resume) or {}
            if meta.get("config", {}).get("hidden") != hidden or \
                    meta.get("config", {}).get("batch_size") != batch_size or \
                    meta.get("config", {}).get("seed") != seed:
                raise ValueError(f"{resume} was written with another configuration: "
                                 f"{meta.get('config')}")
            cfg.start_epoch = int(meta["epoch"])
        else:
            p = init_params(Xtr.shape[1], hidden, 10, seed)
            kv.init(list(KEYS), [p[k] for k in KEYS])
        # the sum of the workers' mean gradients, over W: the mean gradient of the batch
        kv.set_optimizer(kvstore.SGD(learning_rate, momentum=momentum,
                                     rescale_grad=1.0 / workers))
        reporter = _Reporter(workers, steps_per_epoch(len(ytr), batch_size), progress, out,
                             cfg.start_epoch)
        try:
            results = kvstore.run_workers(rank_train, workers, kv, cfg,
                                          on_report=reporter)
        finally:
            reporter.close()
        result.history = reporter.history
        result.epoch_times = reporter.epoch_times
        params = {k: kv.pull(k) for k in KEYS}
        result.params = {k: numpy.asarray(v) for k, v in params.items()}
        if not result.history and results:
            result.history = results[0]["history"]
    return result


class _Reporter:
    """Turns the ranks' reports into a tqdm bar per epoch and a line per epoch."""

    def __init__(self, workers: int, steps: int, progress: bool, out: Any,
                 start_epoch: int) -> None:
        self.workers = workers
        self.steps = steps
        self.progress = progress
        self.out = out
        self.bar = None
        self.pending: dict[int, list[dict]] = {}
        self.history: list[dict[str, float]] = []
        self.epoch_times: list[float] = []
        self.t0 = time.perf_counter()

    def __call__(self, rank: int, msg: Any) -> None:
        if msg[0] == "step" and self.progress:
            _, epoch, step, total = msg
            if self.bar is None:
                from tqdm import tqdm
                self.bar = tqdm(total=total, desc=f"epoch {epoch + 1}", unit="step",
                                leave=False, file=sys.stderr)
            self.bar.update(step - self.bar.n)
        elif msg[0] == "epoch":
            rec = msg[1]
            recs = self.pending.setdefault(rec["epoch"], [])
            recs.append(rec)
            if len(recs) == self.workers:
                del self.pending[rec["epoch"]]
                now = time.perf_counter()
                self.epoch_times.append(now - self.t0)
                self.t0 = now
                n = sum(r["count"] for r in recs)
                line = {"epoch": rec["epoch"],
                        "loss": sum(r["loss_sum"] for r in recs) / max(n, 1),
                        "train_acc": sum(r["correct"] for r in recs) / max(n, 1),
                        "test_acc": recs[0]["test_acc"],
                        "seconds": self.epoch_times[-1]}
                self.history.append(line)
                if self.bar is not None:
                    self.bar.close()
                    self.bar = None
                if self.progress:
                    print(f"epoch {line['epoch']}: loss {line['loss']:.4f}  train accuracy "
                          f"{line['train_acc']:.3f}  test accuracy {line['test_acc']:.3f}  "
                          f"({line['seconds']:.2f} s)", file=self.out, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def main(args: Any) -> int:
    """The CLI entry (``python -m lazynp train``)."""
    try:
        res = train(workers=args.workers, epochs=args.epochs, mode=args.mode,
                    scheduler=args.scheduler, num_servers=args.servers,
                    batch_size=args.batch_size, hidden=args.hidden,
                    learning_rate=args.lr, momentum=args.momentum, seed=args.seed,
                    checkpoint=args.checkpoint, resume=args.resume,
                    progress=not args.quiet, timeout=args.timeout)
    except kvstore.KVStoreError as exc:
        print(f"training stopped: {exc}", file=sys.stderr)
        if args.checkpoint and os.path.exists(args.checkpoint):
            print(f"resume with: python -m lazynp train --resume {args.checkpoint} ...",
                  file=sys.stderr)
        return 1
    last = res.history[-1] if res.history else None
    if last is not None:
        print(f"done ({res.data} data, {args.workers} worker(s), {args.mode}): loss "
              f"{last['loss']:.4f}, test accuracy {last['test_acc']:.3f}"
              + (f"; checkpoint {args.checkpoint}" if args.checkpoint else ""))
    return 0

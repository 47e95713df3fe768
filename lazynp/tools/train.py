"""``python -m lazynp train``: data-parallel training of an MLP through the KVStore.

A two-layer NumPy-style MLP (``tanh`` hidden layer, softmax output) is trained on
scikit-learn's bundled digits data (8x8 images, 10 classes; nothing is downloaded), or, when
scikit-learn is absent, on a synthetic task of the same shape that needs learning
(:func:`synthetic_data`: each class a mixture of clusters, seen through a nonlinear map,
with noise and 5% wrong labels; test accuracy about 0.65 after one epoch, 0.84 after six).
Every worker rank runs :func:`rank_train` on a dask worker: each step it takes its shard of
the global batch, computes ``lazynp.value_and_grad`` of the loss, pushes each gradient (last
layer first, so the pushes start while the rest of the backward pass still runs) and pulls
the new weights into its parameter arrays, which the next step's forward pass then waits
for. The servers run SGD with momentum. In ``sync`` mode one step is one server round: the
result equals single-process training on the whole batch. After every epoch the ranks meet
at a barrier, rank 0 writes a checkpoint (server state with the optimizer's, plus the epoch,
the data set and the model's shape), and ``resume`` continues from one: epochs depend only
on the seed and their number, so a resumed run gives the same result as an uninterrupted
one. A checkpoint of another data set, model shape, batch or seed is refused.

:func:`main` (the CLI) answers every failure with one line on stderr, what is wrong and what
to do, and a non-zero exit status: 2 for a bad invocation (:class:`UsageError`), 1 when
training stopped (:class:`TrainingStopped`: a process lost or not answering, the scheduler
unreachable), 130 for Ctrl-C.
"""
from __future__ import annotations

import hashlib
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
from lazynp.kvstore import quiet

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


class UsageError(ValueError):
    """A setting or a checkpoint that cannot train (the CLI exits 2 with the message)."""


class NothingToTrain(Exception):
    """The checkpoint to resume already holds every epoch asked for (not an error: the
    CLI says so and exits 0)."""


class TrainingStopped(kvstore.KVStoreError):
    """Training stopped: a process was lost or stopped answering, the scheduler cannot be
    reached, or Ctrl-C.

    Attributes
    ----------
    checkpoint : str or None
        A checkpoint to resume from: the last one this run wrote, else the one it resumed
        from (None: no usable checkpoint).
    epoch : int
        The epochs that checkpoint holds.
    started : bool
        False when the store could not even be made (the scheduler cannot be reached).
    interrupted : bool
        Stopped by Ctrl-C (KeyboardInterrupt); the embedded cluster is closed.
    """

    def __init__(self, message: str, checkpoint: str | None, epoch: int,
                 started: bool = True, interrupted: bool = False) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint
        self.epoch = epoch
        self.started = started
        self.interrupted = interrupted


def synthetic_data(n: int = 1797, seed: int = 1234) -> tuple[numpy.ndarray, numpy.ndarray]:
    """A 10-class task of digits' shape (64 features) that needs learning: each class is a
    mixture of 3 Gaussian clusters in 8 latent dimensions, seen through ``tanh`` of a random
    linear map, plus feature noise and 5% labels drawn at random.  A linear classifier
    (least squares) reaches about 0.74 on held-out data; the MLP's test accuracy grows over
    the epochs (about 0.65 after one, 0.84 after six)."""
    rng = numpy.random.default_rng(seed)
    latent, per_class = 8, 3
    centers = 2.0 * rng.standard_normal((10, per_class, latent))
    y = rng.integers(0, 10, n)
    z = centers[y, rng.integers(0, per_class, n)] + rng.standard_normal((n, latent))
    mixing = rng.standard_normal((latent, 64)) / math.sqrt(latent)
    # (einsum's own loop, not BLAS: the bits must not depend on the process's BLAS threads,
    # which dask's worker processes set to one; a checkpoint records the data's digest)
    X = numpy.tanh(numpy.einsum("nl,lf->nf", z, mixing)) + 0.3 * rng.standard_normal((n, 64))
    wrong = rng.random(n) < 0.05
    y = numpy.where(wrong, rng.integers(0, 10, n), y)
    return X, y.astype(numpy.int64)


def load_dataset() -> tuple[numpy.ndarray, numpy.ndarray, str]:
    """``(X, y, name)``: scikit-learn's digits scaled to [0, 1] (``"digits"``), or
    :func:`synthetic_data` without scikit-learn (``"synthetic"``)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        X, y = synthetic_data()
        return X, y, "synthetic"
    d = load_digits()
    return d.data / 16.0, d.target.astype(numpy.int64), "digits"


def load_data(seed: int = 0) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray,
                                      numpy.ndarray, str]:
    """``(X_train, y_train, X_test, y_test, source)``: :func:`load_dataset`, shuffled by
    ``seed``, split 80/20."""
    X, y, source = load_dataset()
    perm = numpy.random.default_rng(seed).permutation(len(y))
    X, y = X[perm], y[perm]
    n = int(0.8 * len(y))
    return X[:n], y[:n], X[n:], y[n:], source


def data_record() -> dict[str, Any]:
    """What a checkpoint records of the data set: name, size and a digest of the values."""
    X, y, name = load_dataset()
    digest = hashlib.sha256(numpy.ascontiguousarray(X, dtype=numpy.float64).tobytes())
    digest.update(numpy.ascontiguousarray(y, dtype=numpy.int64).tobytes())
    return {"name": name, "samples": int(X.shape[0]), "features": int(X.shape[1]),
            "classes": int(y.max()) + 1, "sha256": digest.hexdigest()[:16]}


def model_shapes(n_in: int, hidden: int, n_out: int = 10) -> dict[str, list[int]]:
    """The shape of each parameter, as a checkpoint records it."""
    return {"w1": [n_in, hidden], "b1": [hidden], "w2": [hidden, n_out], "b2": [n_out]}


def check_settings(workers: int, epochs: int, batch_size: int, hidden: int,
                   num_servers: int = 1, timeout: float = 60.0,
                   connect_timeout: float = 10.0) -> None:
    """Raise :class:`UsageError` (a message naming the CLI option and what to pass) for a
    setting that cannot train."""
    for name, value in (("--workers", workers), ("--epochs", epochs),
                        ("--batch-size", batch_size), ("--hidden", hidden),
                        ("--servers", num_servers)):
        if value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")
    for name, value in (("--timeout", timeout), ("--connect-timeout", connect_timeout)):
        if not value > 0:
            raise UsageError(f"{name} must be a positive number of seconds, got {value:g}")
    if batch_size % workers:
        fits = [w for w in range(1, min(batch_size, 16) + 1) if batch_size % w == 0]
        raise UsageError(f"--batch-size {batch_size} does not split evenly over --workers "
                         f"{workers}: pass a --workers that divides it "
                         f"({', '.join(map(str, fits))}) or a --batch-size that is a "
                         f"multiple of {workers} (e.g. "
                         f"{batch_size + workers - batch_size % workers})")


def read_checkpoint_meta(path: str) -> dict[str, Any]:
    """The ``meta`` a training checkpoint was written with (:class:`UsageError` when the
    file is missing or not a checkpoint)."""
    if not os.path.exists(path):
        raise UsageError(f"--resume {path}: no such file (pass the checkpoint a run wrote "
                         f"with --checkpoint)")
    from lazynp.kvstore import checkpoint as _checkpoint
    try:
        meta = _checkpoint.read(path)[2]
    except kvstore.KVStoreError:
        # (the reader's own message, e.g. NumPy's advice on pickles for a text file,
        # would mislead here)
        raise UsageError(f"--resume {path}: not a training checkpoint (it cannot be read "
                         f"as the .npz file 'python -m lazynp train --checkpoint' "
                         f"writes)") from None
    if not isinstance(meta, dict) or "epoch" not in meta:
        raise UsageError(f"--resume {path}: a KVStore checkpoint, but not one of "
                         f"'python -m lazynp train' (it records no epoch)")
    return meta


def resume_epoch(meta: dict[str, Any], path: str, *, epochs: int, hidden: int,
                 batch_size: int, seed: int, data: dict[str, Any]) -> int:
    """The epochs a checkpoint holds, after checking it was trained on this data set with
    this model shape, batch and seed (:class:`UsageError` naming the difference and what to
    pass; :class:`NothingToTrain` when it already holds ``epochs``)."""
    saved_data = meta.get("data")
    if not isinstance(saved_data, dict) or "model" not in meta:
        raise UsageError(f"--resume {path}: the checkpoint records no data set or model "
                         f"shape (written by an older lazynp): start without --resume")
    if saved_data != data:
        what = saved_data.get("name", "?")
        if what == data["name"]:
            what += (f" data of another content (digest {saved_data.get('sha256')} vs "
                     f"{data['sha256']})")
        else:
            what += " data"
        hint = " (scikit-learn is not installed here)" if data["name"] == "synthetic" and \
            saved_data.get("name") == "digits" else ""
        raise UsageError(f"--resume {path}: the checkpoint was trained on {what}, this run "
                         f"has {data['name']} data{hint}: resume where the same data set is "
                         f"available, or start without --resume")
    saved_model = meta["model"]
    model = model_shapes(data["features"], hidden, data["classes"])
    if saved_model != model:
        saved_hidden = saved_model.get("b1", ["?"])[0]
        raise UsageError(f"--resume {path}: the checkpoint holds a model with "
                         f"{saved_hidden} hidden units, this run asks for --hidden {hidden}: "
                         f"pass --hidden {saved_hidden}, or start without --resume")
    config = meta.get("config", {})
    for option, key, value in (("--batch-size", "batch_size", batch_size),
                               ("--seed", "seed", seed)):
        if config.get(key) != value:
            raise UsageError(f"--resume {path}: the checkpoint was trained with {option} "
                             f"{config.get(key)}, this run has {option} {value}: pass "
                             f"{option} {config.get(key)}, or start without --resume")
    done = int(meta["epoch"])
    if done >= epochs:
        raise NothingToTrain(f"{path} already holds {done} epoch(s) and --epochs is "
                             f"{epochs}: nothing to train (pass --epochs {done + 1} or more "
                             f"to train further)")
    return done


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
    record = data_record() if rank == 0 and cfg.checkpoint else None
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
            kv.save(cfg.checkpoint, meta=checkpoint_record(cfg, epoch + 1, record))
        kv.barrier()                      # nobody pushes before the checkpoint is written
        rec = {"epoch": epoch + 1, "loss_sum": loss_sum, "correct": correct,
               "count": count, "test_acc": test_acc}
        history.append(rec)
        kv.report(("epoch", rec))
        if cfg.max_steps is not None and steps >= cfg.max_steps:
            break
    return {"history": history,
            "params": {k: numpy.asarray(params[k]) for k in KEYS} if rank == 0 else None}


def checkpoint_record(cfg: TrainConfig, epoch: int, data: dict[str, Any]) -> dict[str, Any]:
    """The ``meta`` of a training checkpoint after ``epoch`` epochs: the epoch, the
    configuration, the data set (:func:`data_record`) and the model's parameter shapes."""
    return {"epoch": epoch, "config": _meta_config(cfg), "data": data,
            "model": model_shapes(data["features"], cfg.hidden, data["classes"])}


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
          progress: bool = True, timeout: float = 60.0, connect_timeout: float = 10.0,
          max_steps: int | None = None,
          step_hook: Callable[[int, int, int], None] | None = None,
          out: Any = None, quiet_cluster: bool = False) -> TrainResult:
    """Train the MLP with ``workers`` data-parallel ranks; see the module docstring.

    Parameters
    ----------
    workers : int
        Worker ranks (dask workers running :func:`rank_train`); must divide ``batch_size``.
    epochs : int
        Train until this many epochs are done (counting those of a resumed checkpoint).
    mode : {"sync", "async"}
        ``dist_sync`` or ``dist_async`` store.
    client, scheduler
        A ``distributed.Client``, or a scheduler address; neither: an embedded cluster.
    checkpoint : str, optional
        Write a checkpoint here after every epoch.
    resume : str, optional
        Continue from this checkpoint (its data set, model shape, batch and seed must
        match).
    progress : bool
        Show a tqdm progress bar per epoch and a loss/accuracy line per epoch.
    timeout, connect_timeout : float
        The store's longest wait; the longest wait to reach ``scheduler``.
    max_steps, step_hook
        Stop after ``max_steps`` steps; call ``step_hook(rank, epoch, step)`` before each
        step (fault injection: :class:`KillAt`).
    quiet_cluster : bool
        The embedded cluster's processes log nothing below CRITICAL (the CLI).

    Raises
    ------
    UsageError
        A setting that cannot train, or a checkpoint that does not fit this run.
    NothingToTrain
        ``resume``'s checkpoint already holds ``epochs`` epochs.
    TrainingStopped
        A worker or server process was lost or stopped answering, the scheduler cannot be
        reached, or Ctrl-C; resume from its ``checkpoint`` attribute.
    """
    if mode not in ("sync", "async"):
        raise UsageError(f"mode must be 'sync' or 'async', got {mode!r}")
    check_settings(workers, epochs, batch_size, hidden, num_servers, timeout,
                   connect_timeout)
    start_epoch = 0
    if resume:
        start_epoch = resume_epoch(read_checkpoint_meta(resume), resume, epochs=epochs,
                                   hidden=hidden, batch_size=batch_size, seed=seed,
                                   data=data_record())
    out = sys.stdout if out is None else out
    Xtr, ytr, _, _, source = load_data(seed)
    cfg = TrainConfig(epochs=epochs, start_epoch=start_epoch, batch_size=batch_size,
                      hidden=hidden, learning_rate=learning_rate, momentum=momentum,
                      seed=seed, max_steps=max_steps, checkpoint=checkpoint,
                      step_hook=step_hook, report_steps=progress)
    kind = "dist_sync" if mode == "sync" else "dist_async"
    result = TrainResult({}, data=source)
    reporter = _Reporter(workers, steps_per_epoch(len(ytr), batch_size), progress, out,
                         start_epoch)
    started = False
    try:
        with kvstore.create(kind, client=client if client is not None else scheduler,
                            num_servers=num_servers, workers=workers, timeout=timeout,
                            connect_timeout=connect_timeout,
                            cluster_kwargs=quiet.cluster_kwargs()
                            if quiet_cluster else None) as kv:
            started = True
            if resume:
                kv.load(resume)
            else:
                p = init_params(Xtr.shape[1], hidden, 10, seed)
                kv.init(list(KEYS), [p[k] for k in KEYS])
            # the sum of the workers' mean gradients, over W: the mean gradient of the batch
            kv.set_optimizer(kvstore.SGD(learning_rate, momentum=momentum,
                                         rescale_grad=1.0 / workers))
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
    except (kvstore.KVStoreError, KeyboardInterrupt) as exc:
        if isinstance(exc, TrainingStopped):
            raise
        done = reporter.history[-1]["epoch"] if reporter.history else 0
        if checkpoint and done > start_epoch:
            ck, epoch = checkpoint, done        # written by this run, before the report
        elif resume:
            ck, epoch = resume, start_epoch
        else:
            ck, epoch = None, 0
        if isinstance(exc, KeyboardInterrupt):
            raise TrainingStopped("interrupted (Ctrl-C)", ck, epoch, started,
                                  interrupted=True) from None
        raise TrainingStopped(" ".join(str(exc).split()), ck, epoch, started) from exc
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
    """The CLI entry (``python -m lazynp train``): the exit status.  Every failure is one
    line on stderr (what is wrong, what to do), without a traceback: 2 for a bad
    invocation or checkpoint, 1 when training stopped, 130 for Ctrl-C; 0 when done, or when the checkpoint
    to resume already holds every epoch asked for (said on stdout)."""
    try:
        # a lost process is reported once, below, not as the loggers' tracebacks
        with quiet.silenced():
            res = train(workers=args.workers, epochs=args.epochs, mode=args.mode,
                        scheduler=args.scheduler, num_servers=args.servers,
                        batch_size=args.batch_size, hidden=args.hidden,
                        learning_rate=args.lr, momentum=args.momentum, seed=args.seed,
                        checkpoint=args.checkpoint or None, resume=args.resume,
                        progress=not args.quiet, timeout=args.timeout,
                        connect_timeout=args.connect_timeout, quiet_cluster=True)
    except UsageError as exc:
        print(f"lazynp train: {exc}", file=sys.stderr)
        return 2
    except NothingToTrain as exc:
        print(f"lazynp train: {exc}")
        return 0
    except TrainingStopped as exc:
        if exc.checkpoint is not None:
            hint = (f"; resume from epoch {exc.epoch} with: python -m lazynp train --resume "
                    f"{exc.checkpoint} --epochs {args.epochs} (and this run's other options)")
        else:
            hint = "; no checkpoint of this run was written: run it again"
        text = f"training stopped: {exc}{hint}"
        if args.scheduler and not exc.started:
            text = (str(exc).removeprefix("lazynp.kvstore: ") + ": check the address and "
                    "that 'dask scheduler' runs there, or leave out --scheduler to start a "
                    "cluster here")
        print(f"lazynp train: {text}", file=sys.stderr)
        return 130 if exc.interrupted else 1
    last = res.history[-1] if res.history else None
    if last is not None:
        print(f"done ({res.data} data, {args.workers} worker(s), {args.mode}): loss "
              f"{last['loss']:.4f}, test accuracy {last['test_acc']:.3f}"
              + (f"; checkpoint {args.checkpoint}" if args.checkpoint else ""))
    return 0

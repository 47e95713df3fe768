"""``python -m lazynp train`` answers in sentences: every bad invocation, unusable
checkpoint, unreachable scheduler and lost or stopped process ends with one line on stderr
(what is wrong, what to do), a non-zero exit status and no traceback.

The table of cases that fail before any cluster starts runs through the CLI's ``main`` in
this process, and one case of each kind also as a process (concurrently); the checkpoints
they resume are written directly in the KVStore's checkpoint format (no training needed).
Faults are injected by :func:`_injected`, which wraps ``run_workers`` to kill the server or
stop a worker rank when rank 0 reports a given step: on this module's cluster through the
CLI's ``main`` in this process (output captured at the file descriptors); on the CLI's own
embedded cluster, whose processes share its stderr, by running this file as a script
(``--inject``).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import subprocess
import sys

import numpy
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.abspath(__file__)
#: a case that takes longer hangs (a cluster case includes starting dask processes)
CASE_TIMEOUT = 240


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    return env


def _cli(args: list[str], timeout: float = CASE_TIMEOUT,
         env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lazynp", "train", *args], cwd=ROOT,
                          env=env or _env(), capture_output=True, text=True,
                          timeout=timeout)


def _one_line_error(res: subprocess.CompletedProcess, rc: int) -> str:
    """The single stderr line of a failed run (after tqdm's carriage-return bars)."""
    err = res.stderr
    assert res.returncode == rc, (res.returncode, res.stdout, err)
    assert "Traceback" not in err and "Error:" not in err.split("lazynp train:")[0], err
    lines = [ln for ln in err.replace("\r", "\n").splitlines()
             if ln.strip() and not ln.lstrip().startswith("epoch ")]
    assert len(lines) == 1, err
    assert lines[0].startswith("lazynp train: "), lines[0]
    return lines[0]


# --- checkpoints written without training ---------------------------------------------------

def _write_checkpoint(path: str, epoch: int = 2, hidden: int = 64, seed: int = 0,
                      batch_size: int = 64, data: dict | None = None,
                      legacy: bool = False) -> str:
    from lazynp.kvstore import checkpoint
    from lazynp.tools import train
    data = train.data_record() if data is None else data
    params = train.init_params(data["features"], hidden, data["classes"], seed)
    entries = [checkpoint.Entry(k, params[k]) for k in train.KEYS]
    cfg = train.TrainConfig(hidden=hidden, seed=seed, batch_size=batch_size)
    meta = train.checkpoint_record(cfg, epoch, data)
    if legacy:                       # what lazynp wrote before checkpoints named their data
        meta = {"epoch": epoch, "config": meta["config"]}
    checkpoint.write(path, "dist_sync", entries, None, meta)
    return path


def _other_data() -> dict:
    from lazynp.tools import train
    d = dict(train.data_record())
    d["name"] = "digits" if d["name"] == "synthetic" else "synthetic"
    return d


def _same_name_other_values() -> dict:
    from lazynp.tools import train
    d = dict(train.data_record())
    d["sha256"] = "0" * 16
    return d


#: id -> (arguments (``{ck}``: a checkpoint made by ``make``), make, exit status, what the
#: line must contain)
FAST_CASES = {
    "epochs-0": (["--epochs", "0"], None, 2, ["--epochs must be at least 1"]),
    "workers-0": (["--workers", "0"], None, 2, ["--workers must be at least 1"]),
    "workers-3-batch-64": (["--workers", "3"], None, 2,
                           ["--batch-size 64 does not split evenly over --workers 3",
                            "(1, 2, 4, 8, 16)"]),
    "batch-size-0": (["--batch-size", "0"], None, 2, ["--batch-size must be at least 1"]),
    "servers-0": (["--servers", "0"], None, 2, ["--servers must be at least 1"]),
    "timeout-0": (["--timeout", "0"], None, 2, ["--timeout must be a positive number"]),
    "resume-missing": (["--resume", "{ck}"], None, 2, ["no such file"]),
    "resume-not-a-checkpoint": (["--resume", "{ck}"], "garbage", 2,
                                ["not a training checkpoint"]),
    "resume-other-hidden": (["--resume", "{ck}", "--hidden", "32", "--epochs", "5"],
                            dict(hidden=64), 2,
                            ["64 hidden units", "--hidden 32", "pass --hidden 64"]),
    "resume-other-data-set": (["--resume", "{ck}", "--epochs", "5"], "other-data", 2,
                              ["the checkpoint was trained on", "start without --resume"]),
    "resume-same-name-other-values": (["--resume", "{ck}", "--epochs", "5"], "other-values",
                                      2, ["data of another content"]),
    "resume-other-seed": (["--resume", "{ck}", "--seed", "1", "--epochs", "5"], dict(), 2,
                          ["--seed 0", "--seed 1"]),
    "resume-other-batch": (["--resume", "{ck}", "--batch-size", "32", "--epochs", "5"],
                           dict(), 2, ["--batch-size 64", "--batch-size 32"]),
    "resume-legacy-checkpoint": (["--resume", "{ck}", "--epochs", "5"], "legacy", 2,
                                 ["records no data set", "older lazynp"]),
    "scheduler-bad-address": (["--scheduler", "nonsense"], None, 1,
                              ["'nonsense' is not a dask scheduler address",
                               "leave out --scheduler"]),
    "scheduler-unreachable": (["--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1"],
                              None, 1, ["cannot reach the dask scheduler at "
                                        "'tcp://127.0.0.1:9' within 1 s",
                                        "leave out --scheduler"]),
}


def _make(kind, path: str) -> None:
    if kind is None:
        return
    if kind == "garbage":
        with open(path, "wb") as f:
            f.write(b"not a checkpoint\n")
    elif kind == "other-data":
        _write_checkpoint(path, data=_other_data())
    elif kind == "other-values":
        _write_checkpoint(path, data=_same_name_other_values())
    elif kind == "legacy":
        _write_checkpoint(path, legacy=True)
    else:
        _write_checkpoint(path, **kind)


def _args(case: str, tmp_path) -> list[str]:
    args, make, _, _ = FAST_CASES[case]
    ck = str(tmp_path / f"{case}.npz")
    _make(make, ck)
    return [a.replace("{ck}", ck) for a in args] + ["--checkpoint", ""]


@pytest.mark.parametrize("case", list(FAST_CASES))
def test_a_bad_invocation_is_one_line_and_an_exit_status(case, tmp_path, capsys):
    """The whole table through the CLI's ``main`` in this process (each case fails before
    any cluster starts)."""
    from lazynp.__main__ import main
    _, _, rc, parts = FAST_CASES[case]
    got = main(["train", *_args(case, tmp_path)])
    out = capsys.readouterr()
    line = _one_line_error(subprocess.CompletedProcess([], got, out.out, out.err), rc)
    for p in parts:
        assert p in line, (p, line)
    assert out.out == ""


#: the cases also run as real processes (one of each kind, concurrently)
PROCESS_CASES = ["epochs-0", "workers-3-batch-64", "resume-other-hidden",
                 "scheduler-unreachable"]


def test_a_bad_invocation_as_a_process_exits_non_zero_with_one_line(tmp_path):
    jobs = {case: _args(case, tmp_path) for case in PROCESS_CASES}
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        futs = {case: pool.submit(_cli, args, 120) for case, args in jobs.items()}
        results = {case: f.result() for case, f in futs.items()}
    for case, res in results.items():
        _, _, rc, parts = FAST_CASES[case]
        line = _one_line_error(res, rc)
        assert all(p in line for p in parts), (case, line)
        assert res.stdout == "", (case, res.stdout)


def test_resuming_a_complete_checkpoint_says_so_and_exits_0(tmp_path):
    ck = _write_checkpoint(str(tmp_path / "done.npz"), epoch=3)
    res = _cli(["--resume", ck, "--epochs", "3", "--checkpoint", ""])
    assert res.returncode == 0, res
    assert res.stderr == "", res.stderr
    assert res.stdout.strip() == (f"lazynp train: {ck} already holds 3 epoch(s) and --epochs "
                                  f"is 3: nothing to train (pass --epochs 4 or more to train "
                                  f"further)"), res.stdout


# --- the synthetic data set needs learning --------------------------------------------------

def test_the_synthetic_task_is_not_learned_in_one_epoch():
    """Without scikit-learn the MLP trains on :func:`synthetic_data`: its test accuracy
    (SGD of the CLI's settings, NumPy reference) grows over six epochs, from below 0.75,
    and ends above what a linear classifier (least squares, same split) reaches."""
    from lazynp.tools import train
    from kvstore_support import mlp_grads
    X, y = train.synthetic_data()
    onehot = numpy.eye(10)[y]
    perm = numpy.random.default_rng(0).permutation(len(y))
    n = int(0.8 * len(y))
    tr, te = perm[:n], perm[n:]
    A = numpy.hstack([X, numpy.ones((len(X), 1))])
    coef = numpy.linalg.lstsq(A[tr], onehot[tr], rcond=None)[0]
    linear = numpy.mean(numpy.argmax(A[te] @ coef, axis=1) == y[te])
    p = train.init_params(64, 64, 10, 0)
    mom = {k: numpy.zeros_like(v) for k, v in p.items()}
    accs = []
    for epoch in range(6):
        order = numpy.random.default_rng([0, epoch]).permutation(n)
        for s in range(n // 64):
            idx = tr[order[s * 64:(s + 1) * 64]]
            g = mlp_grads(p, X[idx], onehot[idx])
            for k in p:
                mom[k] = 0.9 * mom[k] - 0.1 * g[k]
                p[k] = p[k] + mom[k]
        z = numpy.tanh(X[te] @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        accs.append(numpy.mean(numpy.argmax(z, axis=1) == y[te]))
    assert accs[0] < 0.75 and accs[-1] > accs[0] + 0.1, accs
    assert linear < accs[-1] - 0.05, (linear, accs)


# --- faults: a killed server, a stopped worker, too few workers -----------------------------

@pytest.fixture(scope="module")
def cluster3():
    """A dask cluster of 3 one-thread workers (its scheduler's address for --scheduler)."""
    from kvstore_support import start_cluster, stop_cluster
    cluster, client = start_cluster(3)
    yield client
    stop_cluster(cluster, client)


def _inject(action: str, epoch: int, step: int, args: list[str],
            env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, HERE, "--inject", action, str(epoch), str(step),
                           *args], cwd=ROOT, env=env or _env(), capture_output=True,
                          text=True, timeout=CASE_TIMEOUT)


def _main_here(args: list[str], capfd, inject: tuple | None = None,
               pid_file: str | None = None) -> subprocess.CompletedProcess:
    """The CLI's ``main`` in this process (cases on the module's cluster: no process
    start-up), its output captured at the file descriptors."""
    from lazynp.__main__ import main
    with _injected(*(inject or (None, 0, 0)), pid_file=pid_file):
        rc = main(["train", *args])
    out = capfd.readouterr()
    return subprocess.CompletedProcess(args, rc, out.out, out.err)


def test_more_ranks_than_the_clusters_threads_fail_at_once(cluster3, capfd):
    res = _main_here(["--scheduler", cluster3.scheduler.address, "--workers", "4",
                      "--timeout", "60", "--checkpoint", "", "--quiet"], capfd)
    line = _one_line_error(res, 1)
    assert "4 worker ranks need 4 dask worker threads" in line, line
    assert "the cluster has 3 (3 worker(s))" in line and "run at most 3 ranks" in line, line
    assert "no answer" not in line and "may hang" not in line, line


def test_a_stopped_worker_is_named_with_its_pid_and_the_checkpoint_of_this_run(cluster3,
                                                                               tmp_path,
                                                                               capfd):
    ck = str(tmp_path / "ck.npz")
    pid_file = str(tmp_path / "stopped")
    res = _main_here(["--scheduler", cluster3.scheduler.address, "--epochs", "2",
                      "--timeout", "5", "--checkpoint", ck], capfd,
                     inject=("stop-rank-1", 1, 3), pid_file=pid_file)
    line = _one_line_error(res, 1)
    pid = int(open(pid_file).read())
    assert "worker rank 1 (" in line and f"pid {pid}), silent for" in line, line
    assert "stopped answering" in line and "(the process may hang" not in line, line
    assert f"resume from epoch 1 with: python -m lazynp train --resume {ck} --epochs 2" \
        in line, line


def test_ctrl_c_is_one_line_with_the_checkpoint_to_resume(cluster3, tmp_path, capfd):
    ck = str(tmp_path / "ck.npz")
    res = _main_here(["--scheduler", cluster3.scheduler.address, "--epochs", "3",
                      "--checkpoint", ck], capfd, inject=("ctrl-c", 1, 2))
    line = _one_line_error(res, 130)
    assert line == (f"lazynp train: training stopped: interrupted (Ctrl-C); resume from "
                    f"epoch 1 with: python -m lazynp train --resume {ck} --epochs 3 (and "
                    f"this run's other options)"), line


def test_a_killed_server_is_one_line_and_no_stale_hint(cluster3, tmp_path, capfd):
    ck = tmp_path / "stale.npz"
    _write_checkpoint(str(ck), epoch=4)           # left by some earlier run
    before = ck.stat().st_mtime_ns
    res = _main_here(["--scheduler", cluster3.scheduler.address, "--epochs", "2",
                      "--checkpoint", str(ck), "--timeout", "60"], capfd,
                     inject=("kill-server", 0, 3))
    line = _one_line_error(res, 1)
    assert "lost server 0 (" in line and "pid " in line, line
    assert "no checkpoint of this run was written: run it again" in line, line
    assert "--resume" not in line, line
    assert ck.stat().st_mtime_ns == before


def test_the_embedded_clusters_processes_print_no_tracebacks_when_the_server_dies():
    """With no --scheduler the cluster's processes share the CLI's stderr: when the server
    is killed, the ranks' and the driver's dask, distributed and tornado loggers (which
    printed some 80 tracebacks) are silent, and the one line remains."""
    res = _inject("kill-server", 0, 3, ["--workers", "1", "--epochs", "2", "--checkpoint",
                                        "", "--timeout", "60"])
    line = _one_line_error(res, 1)
    assert "lost server 0 (" in line, line


def test_the_embedded_clusters_workers_leave_ctrl_c_to_the_driver():
    """A terminal's Ctrl-C reaches every process of the group: the embedded cluster's
    workers (their preload) ignore SIGINT, so only the driver answers it, in one line (each
    worker printed a KeyboardInterrupt traceback).  The preload's text, run in a bare
    process that then gets SIGINT."""
    from lazynp.kvstore import quiet
    code = (quiet.PRELOAD + "import logging, os, signal\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "print(logging.getLogger('tornado.application').level)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert (res.returncode, res.stdout.strip(), res.stderr) == (0, "50", ""), res


# --- the fault-injecting driver (run as a script) -------------------------------------------

@contextlib.contextmanager
def _injected(action: str | None, epoch: int, step: int, pid_file: str | None = None):
    """While the block runs, ``run_workers`` (as the training CLI calls it) kills the
    store's server 0 (``"kill-server"``), stops worker rank 1 (``"stop-rank-1"``, its pid
    written to ``pid_file``; continued after the block) or sends this process SIGINT
    (``"ctrl-c"``) when rank 0 reports step ``step`` (1-based) of epoch ``epoch``
    (0-based)."""
    from lazynp import kvstore
    if action is None:
        yield
        return
    real = kvstore.run_workers
    stopped: list[int] = []

    def run_workers(fn, n, kv, *args, on_report=None, **kwargs):
        def report(rank, msg):
            if not stopped and msg[0] == "step" and (msg[1], msg[2]) >= (epoch, step):
                if action == "kill-server":
                    stopped.append(kv.servers[0].pid)
                    os.kill(stopped[0], signal.SIGKILL)
                elif action == "ctrl-c":
                    stopped.append(os.getpid())
                    signal.raise_signal(signal.SIGINT)
                else:
                    stopped.append(kv._spec.peers[1][1])
                    with open(pid_file, "w") as f:
                        f.write(str(stopped[0]))
                    os.kill(stopped[0], signal.SIGSTOP)
            on_report(rank, msg)
        return real(fn, n, kv, *args, on_report=report, **kwargs)

    kvstore.run_workers = run_workers
    try:
        yield
    finally:
        kvstore.run_workers = real
        if stopped and action == "stop-rank-1":
            os.kill(stopped[0], signal.SIGCONT)     # (the test's cluster goes on)


if __name__ == "__main__" and sys.argv[1:2] == ["--inject"]:
    from lazynp.__main__ import main as _main
    with _injected(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])):
        _code = _main(["train", *sys.argv[5:]])
    sys.exit(_code)

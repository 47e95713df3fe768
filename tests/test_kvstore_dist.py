"""dist_sync / dist_async on a LocalCluster of 4 processes (2 servers, 2 worker ranks).
NumPy is the oracle: single-process training, optimizers written out, exact round trips."""
from __future__ import annotations

import sys

import cloudpickle
import numpy
import pytest

import lazynp as np
from lazynp.tools import train as _train
from lazynp import kvstore
from lazynp.kvstore import Adam, KVStoreError, SGD

from kvstore_support import hang_guard, reference_training, start_cluster, stop_cluster

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # rank functions travel by value

TIMEOUT = 30


@pytest.fixture(scope="module")
def client():
    with hang_guard(120):
        cluster, client = start_cluster(4)
    yield client
    stop_cluster(cluster, client)


@pytest.fixture(autouse=True)
def _guard():
    with hang_guard(120):
        yield


def _store(client, kind="dist_sync", servers=2, **kw):
    return kvstore.create(kind, client=client, num_servers=servers, timeout=TIMEOUT, **kw)


def test_sync_training_of_5_steps_equals_single_process(client):
    res = _train.train(workers=2, epochs=1, mode="sync", client=client, num_servers=2,
                       progress=False, max_steps=5, timeout=TIMEOUT)
    ref = reference_training(5)
    for k in _train.KEYS:
        numpy.testing.assert_allclose(res.params[k], ref[k], rtol=0, atol=1e-10)
    # five steps moved the weights: the comparison is not of initial values
    init = _train.init_params(64, 64, 10, 0)
    assert numpy.abs(res.params["w2"] - init["w2"]).max() > 1e-3


def test_async_training_converges(client):
    res = _train.train(workers=2, epochs=3, mode="async", client=client, num_servers=2,
                       progress=False, timeout=TIMEOUT)
    losses = [h["loss"] for h in res.history]
    assert len(losses) == 3 and losses[2] < 0.5 * losses[0], losses
    # (digits: above 0.85; the synthetic task without scikit-learn is harder: about 0.8)
    assert res.history[-1]["test_acc"] > (0.85 if res.data == "digits" else 0.7), res.history
    assert res.history[-1]["test_acc"] > res.history[0]["test_acc"], res.history


def test_a_4_million_element_key_split_over_2_servers_round_trips_exactly(client):
    x = numpy.random.default_rng(0).standard_normal(4_000_000).astype(numpy.float32)
    with _store(client) as kv:
        kv.init("big", x)
        out = np.empty(4_000_000, dtype=numpy.float32)
        kv.pull("big", out=out)
        numpy.testing.assert_array_equal(numpy.asarray(out), x)
        held = [i["keys"] for i in kv.info()]
        assert held == [["('big', 1)"], ["('big', 0)"]] or held == [["('big', 0)"],
                                                                  ["('big', 1)"]]
        # and through a push (no optimizer: the push replaces the value) to a NumPy out
        y = x[::-1].copy()
        kv.push("big", y)
        back = numpy.empty_like(x)
        kv.pull("big", out=back)
        numpy.testing.assert_array_equal(back, y)


SHAPES = {"w": (30, 20), 3: (1_200_000,)}          # key 3 is split over both servers
STEPS = 4


def _grad(key, step, rank):
    """Worker ``rank``'s gradient of ``key`` at ``step`` (made where it is used: no 40 MB
    task arguments)."""
    seed = [11, step, rank, 0 if key == "w" else 1]
    return numpy.random.default_rng(seed).standard_normal(SHAPES[key])


def _push_rounds(kv, rank):
    """Each step: push this rank's gradients, pull the weights; returns the pulls."""
    outs = []
    for step in range(STEPS):
        for k in SHAPES:
            kv.push(k, np.asarray(_grad(k, step, rank)))
        outs.append({k: numpy.asarray(kv.pull(k)) for k in SHAPES})
    return outs


def _local_opt(opt_name, w, gsum, state, t):
    if opt_name == "sgd":
        lr, mu, wd = 0.05, 0.9, 0.01
        state = mu * state - lr * (0.5 * gsum + wd * w)
        return w + state, state
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    m, v = state
    g = 0.5 * gsum
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    lr_t = lr * numpy.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return w - lr_t * m / (numpy.sqrt(v) + eps), (m, v)


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_server_side_optimizer_equals_the_same_optimizer_run_locally(client, opt_name):
    rng = numpy.random.default_rng(7)
    w0 = {k: rng.standard_normal(s) for k, s in SHAPES.items()}
    opt = SGD(0.05, momentum=0.9, wd=0.01, rescale_grad=0.5) if opt_name == "sgd" else \
        Adam(0.01, rescale_grad=0.5)
    with _store(client, big_array_bound=1_000_000) as kv:
        kv.init(list(SHAPES), [w0[k] for k in SHAPES])
        assert len(kv._registry[3].parts) == 2 and len(kv._registry["w"].parts) == 1
        kv.set_optimizer(opt)
        pulled = kvstore.run_workers(_push_rounds, 2, kv)
        final = {k: numpy.asarray(kv.pull(k)) for k in SHAPES}
    for k in SHAPES:
        w = w0[k]
        state = numpy.zeros_like(w) if opt_name == "sgd" else (numpy.zeros_like(w),
                                                               numpy.zeros_like(w))
        for step in range(STEPS):
            w, state = _local_opt(opt_name, w, _grad(k, step, 0) + _grad(k, step, 1),
                                  state, step + 1)
            for rank in range(2):             # lock-step: both ranks see round `step`
                numpy.testing.assert_allclose(pulled[rank][step][k], w, rtol=1e-12,
                                              atol=1e-14)
        numpy.testing.assert_allclose(final[k], w, rtol=1e-12, atol=1e-14)


def _pushes_then_checks(kv, rank):
    w = np.empty(3)
    seen = []
    for i in range(1, 6):
        kv.push("c", np.full(3, float(rank * 10 + i)))
        kv.pull("c", out=w)
        seen.append(float(w[0]))
    kv.barrier()
    return seen


def test_async_pull_follows_the_workers_own_pushes(client):
    with _store(client, "dist_async", servers=1) as kv:
        kv.init("c", numpy.zeros(3))
        seen = kvstore.run_workers(_pushes_then_checks, 2, kv)
        # no optimizer: a push replaces the value; a pull after push i of rank r sees push
        # i or a later push of the other rank, never an older value of its own
        for rank in range(2):
            for i, v in enumerate(seen[rank], 1):
                own = rank * 10 + i
                other = {(1 - rank) * 10 + j for j in range(1, 6)}
                assert v == own or v in other, (rank, seen)
        assert kv.info()[0]["updates"][("c", 0)] == 10


def _bad_inputs(kv, rank):
    errors = []
    for call in (lambda: kv.push("nope", numpy.zeros(3)),
                 lambda: kv.push("w", numpy.zeros(4)),
                 lambda: kv.push("w", numpy.zeros(3, numpy.float32)),
                 lambda: kv.pull("w", out=numpy.zeros((3, 1))),
                 lambda: kv.init("w", numpy.zeros(3))):
        try:
            call()
        except KVStoreError as exc:
            errors.append(str(exc))
    kv.barrier()
    return errors


def test_bad_input_raises_at_the_call_and_changes_nothing_on_the_servers(client):
    with _store(client, servers=2) as kv:
        kv.init("w", numpy.arange(3.0))
        kv.set_optimizer(SGD(1.0))
        before = kv.info()
        errors = kvstore.run_workers(_bad_inputs, 2, kv)
        for errs in errors:
            assert len(errs) == 5
            assert "not initialized" in errs[0] and "shape (4,)" in errs[1]
            assert "dtype float32" in errs[2] and "shape (3, 1)" in errs[3]
            assert "already initialized" in errs[4]
        after = kv.info()
        assert [i["updates"] for i in after] == [i["updates"] for i in before]
        numpy.testing.assert_array_equal(numpy.asarray(kv.pull("w")), numpy.arange(3.0))
        with pytest.raises(KVStoreError, match="not initialized"):
            kv.pull("nope")


def test_resume_from_a_checkpoint_equals_an_uninterrupted_run(client, tmp_path):
    ck = str(tmp_path / "ck.npz")
    full = _train.train(workers=2, epochs=2, mode="sync", client=client, progress=False,
                        timeout=TIMEOUT)
    first = _train.train(workers=2, epochs=1, mode="sync", client=client, progress=False,
                         checkpoint=ck, timeout=TIMEOUT)
    # the checkpoint is layout-independent: resume with one server instead of two
    resumed = _train.train(workers=2, epochs=2, mode="sync", client=client, num_servers=1,
                           progress=False, resume=ck, timeout=TIMEOUT)
    assert [h["epoch"] for h in resumed.history] == [2]
    for k in _train.KEYS:
        assert not numpy.array_equal(first.params[k], full.params[k])
        numpy.testing.assert_array_equal(resumed.params[k], full.params[k])
    assert resumed.history[0]["loss"] == full.history[1]["loss"]


def test_training_cli_runs_with_a_scheduler_address(client, tmp_path, capsys):
    from lazynp.__main__ import main
    ck = tmp_path / "cli.npz"
    rc = main(["train", "--workers", "2", "--epochs", "1", "--scheduler",
               client.scheduler.address, "--checkpoint", str(ck), "--timeout", str(TIMEOUT)])
    out = capsys.readouterr()
    assert rc == 0, out
    assert "epoch 1: loss" in out.out and "test accuracy" in out.out
    assert "epoch 1:" in out.err            # the tqdm bar
    assert ck.exists()

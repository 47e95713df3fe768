"""KVStore without a cluster: placement, server state, optimizers, the local store, the
engine integration and checkpoints.  NumPy is the oracle."""
from __future__ import annotations

import threading

import numpy
import pytest

import lazynp as np
from lazynp.core import graph
from lazynp import kvstore
from lazynp.kvstore import Adam, KVStoreError, SGD
from lazynp.kvstore.partition import check_key, key_hash, plan
from lazynp.kvstore.shard import ShardStore

from kvstore_support import hang_guard


@pytest.fixture(autouse=True)
def _guard():
    with hang_guard(60):
        yield


# --- placement ------------------------------------------------------------------------------

def test_small_keys_hash_to_one_server_and_the_hash_is_stable():
    # the same in every process (Python's hash of a str is not): CRC-32 of the key's text
    assert (key_hash("w1"), key_hash(3)) == (1083334435, 574527186)
    servers = {plan(k, (10,), numpy.float32, 3).parts[0].server for k in range(60)}
    assert servers == {0, 1, 2}                       # spread over every server
    m = plan("w", (1000, 1000), numpy.float32, 3)     # 10^6 elements: not above the bound
    assert len(m.parts) == 1 and (m.parts[0].start, m.parts[0].stop) == (0, 10**6)
    with pytest.raises(TypeError):
        check_key(1.5)
    with pytest.raises(TypeError):
        check_key(True)


def test_big_keys_split_evenly_over_all_servers():
    m = plan(7, (4_000_000,), numpy.float32, 2)
    assert sorted(p.server for p in m.parts) == [0, 1]
    assert [(p.start, p.stop) for p in m.parts] == [(0, 2_000_000), (2_000_000, 4_000_000)]
    m = plan("x", (1001, 1001), numpy.float64, 3, bound=1000)
    sizes = [p.stop - p.start for p in m.parts]
    assert sum(sizes) == 1001 * 1001 and max(sizes) - min(sizes) <= 1
    assert m.parts[0].start == 0 and all(a.stop == b.start for a, b in zip(m.parts, m.parts[1:]))
    assert len(plan("x", (10**7,), numpy.float32, 1).parts) == 1


# --- server state ---------------------------------------------------------------------------

def _shard(mode, workers):
    s = ShardStore(mode)
    s.begin(1, workers)
    s.init(("w", 0), numpy.zeros(3))
    return s


def test_sync_round_applies_once_when_every_worker_pushed():
    s = _shard("sync", 3)
    s.set_optimizer(SGD(1.0))
    assert not s.push(("w", 0), 2, 1, numpy.full(3, 4.0))
    assert not s.push(("w", 0), 0, 1, numpy.full(3, 1.0))
    assert not s.push(("w", 0), 0, 1, numpy.full(3, 100.0))   # a repeat: ignored
    assert not s.ready(("w", 0), 0, 1)
    assert s.push(("w", 0), 1, 1, numpy.full(3, 2.0))
    assert s.ready(("w", 0), 0, 1) and s.updates[("w", 0)] == 1
    numpy.testing.assert_array_equal(s.values[("w", 0)], numpy.full(3, -7.0))
    assert not s.push(("w", 0), 1, 1, numpy.full(3, 50.0))    # round 1 is applied: ignored
    assert s.updates[("w", 0)] == 1
    # a fast worker's next round waits for the round before it
    assert not s.push(("w", 0), 0, 3, numpy.ones(3))
    for r in range(3):
        s.push(("w", 0), r, 2, numpy.ones(3))
    assert s.rounds[("w", 0)] == 2 and s.pending[("w", 0)] == {3: s.pending[("w", 0)][3]}
    with pytest.raises(KVStoreError, match="unfinished round"):
        s.snapshot()


def test_async_applies_each_push_in_the_workers_own_order():
    s = _shard("async", 2)
    assert not s.push(("w", 0), 0, 2, numpy.full(3, 5.0))     # arrived before push 1
    assert not s.ready(("w", 0), 0, 1)
    assert s.push(("w", 0), 0, 1, numpy.full(3, 1.0))
    numpy.testing.assert_array_equal(s.values[("w", 0)], numpy.full(3, 5.0))  # 1 then 2
    assert s.ready(("w", 0), 0, 2) and not s.ready(("w", 0), 1, 1)
    assert s.push(("w", 0), 1, 1, numpy.full(3, 9.0))
    assert s.updates[("w", 0)] == 3


def test_server_rejects_mismatched_pushes_and_unknown_keys():
    s = _shard("sync", 1)
    with pytest.raises(KVStoreError, match="float32"):
        s.push(("w", 0), 0, 1, numpy.zeros(3, numpy.float32))
    with pytest.raises(KVStoreError, match="not initialized"):
        s.push(("v", 0), 0, 1, numpy.zeros(3))
    with pytest.raises(KVStoreError, match="already initialized"):
        s.init(("w", 0), numpy.zeros(3))
    with pytest.raises(KVStoreError, match="rank 1"):
        s.push(("w", 0), 1, 1, numpy.zeros(3))
    assert s.updates[("w", 0)] == 0


# --- optimizers against NumPy written out -------------------------------------------------------

def _grads(n, shape, seed=0):
    rng = numpy.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(n)]


def test_local_sgd_with_momentum_and_weight_decay_equals_numpy():
    w0 = numpy.random.default_rng(1).standard_normal((5, 4))
    gs = _grads(6, (5, 4))
    lr, mu, wd, rs = 0.05, 0.9, 0.01, 0.5
    w, mom = w0.copy(), numpy.zeros_like(w0)
    for g in gs:
        mom = mu * mom - lr * (rs * g + wd * w)
        w = w + mom
    kv = kvstore.create("local")
    kv.init("w", w0)
    kv.set_optimizer(SGD(lr, momentum=mu, wd=wd, rescale_grad=rs))
    for g in gs:
        kv.push("w", np.asarray(g))
    numpy.testing.assert_allclose(numpy.asarray(kv.pull("w")), w, rtol=1e-13, atol=1e-15)


def test_local_adam_equals_numpy():
    w0 = numpy.random.default_rng(2).standard_normal(7)
    gs = _grads(5, 7, seed=3)
    lr, b1, b2, eps, wd = 0.01, 0.8, 0.95, 1e-6, 0.02
    w, m, v = w0.copy(), numpy.zeros(7), numpy.zeros(7)
    for t, g in enumerate(gs, 1):
        g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        # MXNet folds the bias corrections into the step: eps scales by sqrt(1 - b2^t)
        w = w - lr * mhat / (numpy.sqrt(vhat) + eps / numpy.sqrt(1 - b2 ** t))
    kv = kvstore.create("local")
    kv.init(3, w0)
    kv.set_optimizer(Adam(lr, b1, b2, eps, wd=wd))
    for g in gs:
        kv.push(3, g)
    numpy.testing.assert_allclose(numpy.asarray(kv.pull(3)), w, rtol=1e-12)


# --- the local store ---------------------------------------------------------------------------

def test_replicas_are_summed_and_pulls_fan_out():
    kv = kvstore.create("local")
    kv.init(["a", 5], [numpy.zeros((2, 3)), numpy.arange(4.0)])
    a1, a2 = numpy.ones((2, 3)), np.full((2, 3), 2.0)
    kv.push(["a", 5], [[a1, a2, a1], np.arange(4.0) * 3])
    outs = [np.empty((2, 3)), numpy.empty((2, 3))]
    o5 = np.zeros(4)
    kv.pull(["a", 5], out=[outs, o5])
    for o in outs:
        numpy.testing.assert_array_equal(numpy.asarray(o), numpy.full((2, 3), 4.0))
    numpy.testing.assert_array_equal(numpy.asarray(o5), numpy.arange(4.0) * 3)
    assert kv.keys == ["a", 5] and kv.rank == 0 and kv.num_workers == 1


def test_a_pull_sees_earlier_pushes_and_not_later_ones():
    kv = kvstore.create("local")
    kv.init("w", numpy.zeros(1000))
    got = []
    for i in range(1, 6):
        x = np.arange(1000.0) * i
        kv.push("w", np.exp(x / 1000.0))           # pending when pushed
        got.append(kv.pull("w"))
    for i, g in enumerate(got, 1):
        numpy.testing.assert_array_equal(numpy.asarray(g),
                                         numpy.exp(numpy.arange(1000.0) * i / 1000.0))


def test_push_snapshots_the_value_and_pull_makes_out_pending():
    kv = kvstore.create("local")
    kv.init("w", numpy.zeros(5))
    g = np.arange(5.0) + 1.0                  # pending
    kv.push("w", g)
    g += 100.0                                # later writes do not change what was pushed
    numpy_g = numpy.arange(5.0) + 1.0
    n = numpy.ones(5)
    kv.push("w", n)
    n[:] = -1.0                               # a NumPy value is copied at the call
    out = np.zeros(5)
    kv.pull("w", out=out)
    assert out._node().state == graph.PENDING   # nothing ran: reading waits for the pull
    numpy.testing.assert_array_equal(numpy.asarray(out), numpy.ones(5))
    numpy.testing.assert_array_equal(numpy.asarray(g), numpy_g + 100.0)


def test_pull_into_a_view_is_recorded_and_into_a_shared_buffer_reaches_its_numpy_alias():
    kv = kvstore.create("local")
    kv.init("w", numpy.zeros(6))
    kv.push("w", numpy.arange(6.0))
    big = np.zeros((2, 6))                    # small: the policy would run a write at once
    kv.pull("w", out=big[1])
    assert big._node().state == graph.PENDING   # the write into the view waits for the pull
    numpy.testing.assert_array_equal(numpy.asarray(big),
                                     numpy.stack([numpy.zeros(6), numpy.arange(6.0)]))
    base = numpy.zeros(6)
    shared = np.asarray(base)                 # shares base's memory
    kv.pull("w", out=shared)
    numpy.testing.assert_array_equal(base, numpy.arange(6.0))
    numpy.testing.assert_array_equal(numpy.asarray(shared), numpy.arange(6.0))


def test_push_of_an_array_sharing_a_numpy_buffer_is_a_snapshot():
    kv = kvstore.create("local")
    kv.init("g", numpy.zeros(4))
    a = numpy.ones(4)
    kv.push("g", np.asarray(a))               # lazynp array on a's memory
    a[:] = 50.0                               # a write through the NumPy alias right after
    numpy.testing.assert_array_equal(numpy.asarray(kv.pull("g")), numpy.ones(4))
    b = np.full(4, 2.0)
    nb = numpy.asarray(b)                     # b's buffer given out to NumPy
    kv.push("g", b)
    nb[:] = 9.0
    numpy.testing.assert_array_equal(numpy.asarray(kv.pull("g")), numpy.full(4, 2.0))


def test_push_sends_when_the_value_is_ready_without_waiting_for_it():
    kv = kvstore.create("local")
    kv.init("w", numpy.zeros(3))
    gate = threading.Event()
    computed = []

    def value():
        gate.wait(10)
        computed.append(True)
        return numpy.full(3, 7.0)

    slow = kvstore.bridge.pending_value((3,), numpy.dtype(float), kvstore.bridge.KeyClock(),
                                        value)
    kv.push("w", slow)                         # the value is not computed yet
    assert not computed                        # push returned before its value existed
    gate.set()
    numpy.testing.assert_array_equal(numpy.asarray(kv.pull("w")), numpy.full(3, 7.0))


def test_a_failed_push_is_raised_by_the_next_pull():
    kv = kvstore.create("local")
    kv.init("w", numpy.zeros(3))

    def boom():
        raise ZeroDivisionError("in the gradient")
    bad = kvstore.bridge.pending_value((3,), numpy.dtype(float), kvstore.bridge.KeyClock(),
                                       boom)
    kv.push("w", bad)
    with pytest.raises(KVStoreError, match="ZeroDivisionError: in the gradient"):
        numpy.asarray(kv.pull("w"))
    with pytest.raises(KVStoreError, match="earlier push"):
        kv.wait()


def test_bad_input_raises_at_the_call_and_changes_nothing():
    kv = kvstore.create("local")
    kv.init("w", numpy.arange(4.0))
    kv.set_optimizer(SGD(1.0))
    with pytest.raises(KVStoreError, match="not initialized"):
        kv.push("v", numpy.zeros(4))                           # push before init
    with pytest.raises(KVStoreError, match="not initialized"):
        kv.pull(9, out=numpy.zeros(4))
    with pytest.raises(KVStoreError, match=r"shape \(5,\)"):
        kv.push("w", numpy.zeros(5))
    with pytest.raises(KVStoreError, match="dtype float32"):
        kv.push("w", numpy.zeros(4, numpy.float32))
    with pytest.raises(KVStoreError, match="dtype int64"):
        kv.pull("w", out=numpy.zeros(4, numpy.int64))
    with pytest.raises(KVStoreError, match="already initialized"):
        kv.init("w", numpy.zeros(4))
    with pytest.raises(KVStoreError, match=r"shape \(3,\)"):           # nothing of the list
        kv.push(["w", "w"], [numpy.ones(4), numpy.ones(3)])
    with pytest.raises(KVStoreError, match="2 keys"):
        kv.push(["w", "w"], numpy.ones(4))
    with pytest.raises(TypeError):
        kv.push(2.5, numpy.ones(4))
    numpy.testing.assert_array_equal(numpy.asarray(kv.pull("w")), numpy.arange(4.0))
    assert kv._shard.updates[("w", 0)] == 0
    kv.close()
    with pytest.raises(KVStoreError, match="closed"):
        kv.pull("w")


def test_checkpoint_round_trip_continues_like_an_uninterrupted_run(tmp_path):
    gs = _grads(6, (3, 2), seed=5)
    w0 = numpy.ones((3, 2))

    def run(kv, grads):
        for g in grads:
            kv.push("w", g)
        return numpy.asarray(kv.pull("w"))

    full = kvstore.create("local")
    full.init("w", w0)
    full.init(1, numpy.arange(3, dtype=numpy.int32))
    full.set_optimizer(Adam(0.1))
    expected = run(full, gs)
    with kvstore.create("local") as a:
        a.init("w", w0)
        a.init(1, numpy.arange(3, dtype=numpy.int32))
        a.set_optimizer(Adam(0.1))
        run(a, gs[:3])
        a.save(tmp_path / "ck.npz", meta={"epoch": 3})
    with kvstore.create("local") as b:
        assert b.load(tmp_path / "ck.npz") == {"epoch": 3}
        assert b._shard.optimizer == Adam(0.1) and b._shard.updates[("w", 0)] == 3
        numpy.testing.assert_array_equal(run(b, gs[3:]), expected)
        numpy.testing.assert_array_equal(numpy.asarray(b.pull(1)), numpy.arange(3))
        assert b.pull(1).dtype == numpy.int32
    with pytest.raises(KVStoreError, match="cannot read"):
        kvstore.create("local").load(tmp_path / "missing.npz")

"""Graph passes, each alone: prune, CSE, constant folding, copy elimination, fusion,
memory planning."""
import numpy
from hypothesis import given, settings, strategies as st

import lazynp as np
from lazynp.ir.passes import constant_fold, cse, memory_plan as mp, pipeline, prune
from lazynp.symbol import Ref, SNode, Symbol


def _sym(entries, outs):
    return Symbol([SNode(*e) for e in entries], outs)


def _x(n=4):
    return ("placeholder", (), {"name": "x"}, (n,), "float64")


def _run(sym, x):
    return [numpy.asarray(o) for o in sym(x)]


def test_prune_drops_dead_keeps_inputs():
    s = _sym([_x(), ("exp", (Ref(0),), None, (4,), "float64"),
              ("negative", (Ref(0),), None, (4,), "float64")], [2])
    p = prune.prune(s)
    assert [n.op for n in p.nodes] == ["placeholder", "negative"]
    assert p.inputs == ["x"]
    assert prune.prune(p) is p
    x = numpy.arange(4.0)
    numpy.testing.assert_array_equal(_run(p, x)[0], -x)


def test_cse_merges_same_op_args_params():
    s = _sym([_x(), ("add", (Ref(0), 1), None, (4,), "float64"),
              ("add", (Ref(0), 1), None, (4,), "float64"),
              ("add", (Ref(0), 1.0), None, (4,), "float64"),       # float constant differs
              ("multiply", (Ref(1), Ref(2)), None, (4,), "float64"),
              ("add", (Ref(4), Ref(3)), None, (4,), "float64")], [5])
    c = cse.cse(s)
    assert [n.op for n in c.nodes].count("add") == 3
    x = numpy.arange(4.0)
    numpy.testing.assert_array_equal(_run(c, x)[0], _run(s, x)[0])


def test_cse_keeps_signed_zero_constants_apart():
    s = _sym([_x(), ("multiply", (Ref(0), 0.0), None, (4,), "float64"),
              ("multiply", (Ref(0), -0.0), None, (4,), "float64")], [1, 2])
    c = cse.cse(s)
    assert [n.op for n in c.nodes].count("multiply") == 2
    a, b = _run(c, numpy.arange(1.0, 5.0))
    assert not numpy.signbit(a).any() and numpy.signbit(b).all()


def test_constant_fold():
    c1 = numpy.arange(4.0)
    s = _sym([_x(), ("leaf", (), {"value": c1}, (4,), "float64"),
              ("exp", (Ref(1),), None, (4,), "float64"),
              ("multiply", (Ref(2), 2), None, (4,), "float64"),
              ("add", (Ref(0), Ref(3)), None, (4,), "float64")], [4])
    f = constant_fold.constant_fold(s)
    assert [n.op for n in f.nodes] == ["placeholder", "leaf", "add"]
    numpy.testing.assert_array_equal(f.nodes[1].params["value"], numpy.exp(c1) * 2)
    x = numpy.ones(4)
    numpy.testing.assert_array_equal(_run(f, x)[0], _run(s, x)[0])


def test_eliminate_copies():
    s = _sym([_x(), ("copy", (Ref(0),), None, (4,), "float64"),
              ("exp", (Ref(1),), None, (4,), "float64")], [2])
    e = cse.eliminate_copies(s)
    assert [n.op for n in e.nodes] == ["placeholder", "exp"]


def test_fusion_groups_elementwise_chain():
    sym = np.trace(lambda x, w: np.tanh(np.exp(x) * 2 + 1) @ w, numpy.ones((3, 3)),
                   numpy.ones((3, 3)))
    groups = pipeline.fusion(sym)
    ops = [[sym.nodes[i].op for i in g] for g in groups]
    assert ["exp", "multiply", "add", "tanh"] in ops and ["matmul"] in ops


def _chain_values(n, nbytes=800):
    values = [mp.Value(nbytes, 8, "external")]
    steps = []
    for i in range(1, n + 1):
        values.append(mp.Value(nbytes, 8, "planned", is_output=i == n))
        steps.append(mp.Step([i - 1], [i], [(0, 0)]))
    return values, steps


def test_memory_plan_inplace_chain():
    values, steps = _chain_values(10)
    p = mp.plan(values, steps)
    assert p.num_buffers == 1 and len(p.inplace) == 9
    assert p.naive_bytes == 10 * 800 and p.planned_bytes == 800
    p2 = mp.plan(values, steps, allow_inplace=False)
    assert p2.num_buffers == 2                     # co-share: ping-pong between two blocks


def test_memory_plan_never_overwrites_live_value():
    # a = f(x); b = g(a); c = h(a, b): b cannot take a's buffer (a is read later)
    values = [mp.Value(80, 8, "external"), mp.Value(80, 8), mp.Value(80, 8),
              mp.Value(80, 8, is_output=True)]
    steps = [mp.Step([0], [1], [(0, 0)]), mp.Step([1], [2], [(0, 0)]),
             mp.Step([1, 2], [3], [(0, 0), (1, 0)])]
    p = mp.plan(values, steps)
    assert p.storage_of[1] != p.storage_of[2]
    assert p.storage_of[3] in (p.storage_of[1], p.storage_of[2])


def test_memory_plan_parallel_branches_do_not_share():
    # x -> a -> a2 (branch 1) ; x -> b -> b2 (branch 2); out = a2 + b2
    V = mp.Value
    values = [V(80, 8, "external"), V(80, 8), V(80, 8), V(80, 8), V(80, 8),
              V(80, 8, is_output=True)]
    steps = [mp.Step([0], [1]), mp.Step([1], [2]), mp.Step([0], [3]), mp.Step([3], [4]),
             mp.Step([2, 4], [5])]
    p = mp.plan(values, steps, parallel_safe=True)
    anc = mp._ancestors(values, steps)
    # every reuse of a storage is by a step depending on all its earlier users
    users = {}
    for s, st in enumerate(steps):
        for o in st.outputs:
            sid = p.storage_of.get(o)
            for u in users.get(sid, []):
                assert anc[s] >> u & 1, (s, u)
            for i in st.inputs:
                if i in p.storage_of:
                    users.setdefault(p.storage_of[i], []).append(s)
            users.setdefault(sid, []).append(s)
    colors = mp.color_steps(values, steps, 1)
    assert len(set(colors)) == 2


def test_memory_plan_match_range_prefers_smaller_plan():
    V = mp.Value
    # 1000-byte value freed, then a 900-byte value: only a range > 1 reuses the block
    values = [V(8, 8, "external"), V(1000, 8), V(8, 8), V(900, 8, is_output=True)]
    steps = [mp.Step([0], [1]), mp.Step([1], [2]), mp.Step([2], [3])]
    assert mp.plan(values, steps, match_ranges=(1,)).planned_bytes == 1908
    p = mp.plan(values, steps)
    assert p.planned_bytes == 1008 and p.match_range > 1


def test_memory_plan_lower_bound():
    V = mp.Value
    # conv-like steps (no in-place): x -> a -> b -> c; while b is computed a and b are live
    values = [V(8, 8, "external"), V(100, 8), V(300, 8), V(300, 8), V(8, 8, is_output=True)]
    steps = [mp.Step([0], [1]), mp.Step([1], [2]), mp.Step([2], [3], [(0, 0)]),
             mp.Step([3], [4])]
    p = mp.plan(values, steps)
    assert p.lower_bound_bytes == 100 + 300    # c takes b's buffer; the output, a's
    assert p.planned_bytes == p.lower_bound_bytes
    # the in-place chain needs one buffer; without in-place, two
    values, steps = _chain_values(10)
    assert mp.plan(values, steps).lower_bound_bytes == 800
    assert mp.plan(values, steps, allow_inplace=False).lower_bound_bytes == 1600


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_memory_plan_never_below_its_lower_bound(data):
    n = data.draw(st.integers(1, 12))
    values = [mp.Value(64, 8, "external")]
    steps = []
    for i in range(1, n + 1):
        ins = data.draw(st.lists(st.integers(0, i - 1), min_size=1, max_size=3, unique=True))
        values.append(mp.Value(8 * data.draw(st.integers(1, 64)), 8, is_output=i == n))
        inpl = [(k, 0) for k in range(len(ins)) if data.draw(st.booleans())]
        steps.append(mp.Step(ins, [i], inpl))
    p = mp.plan(values, steps)
    assert p.planned_bytes >= p.lower_bound_bytes


def test_memory_plan_symbol_mlp():
    rng = numpy.random.default_rng(0)
    ws = [rng.standard_normal((32, 32)) for _ in range(4)]

    def mlp(x, ws):
        for w in ws:
            x = np.maximum(x @ w + 1.0, 0.0)
        return x
    sym = np.trace(mlp, rng.standard_normal((8, 32)), ws).optimize()
    p = sym.memory_plan()
    assert p.planned_bytes <= 0.35 * p.naive_bytes

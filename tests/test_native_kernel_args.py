"""The C helpers that prepare a kernel's arguments give what their Python references give.

``fused.strided_inputs`` (a kernel's buffers and table of offsets and strides),
``tree._stride_classes`` and ``cpu._type_key`` run on every tree kernel call; the C
extension has its own versions (``_speedups.strided_inputs``, ``stride_classes``,
``type_key``).  Each case below is checked against the pure Python code.
"""
import numpy as np
import pytest

import lazynp  # noqa: F401  (configures the extension)
from lazynp._base import native
from lazynp.kernels import cpu, fused, tree

C_ONLY = pytest.mark.skipif(native.ext is None, reason="the C extension is not in use")

_G = np.arange(6 * 7 * 8, dtype=np.float64).reshape(6, 7, 8)
_Z = (np.arange(40) + 1j * np.arange(40)).reshape(5, 8)

CASES = {
    "stencil views": ([_G[2:, 1:-1, 1:-1], _G[:-2, 1:-1, 1:-1], _G[1:-1, 1:-1, 2:],
                       np.empty((4, 5, 6))], (4, 5, 6)),
    "negative strides": ([_G[::-1, 1:-1, ::-2][:4, :, :3], _G[1:5, 1:-1, 1:4]], (4, 5, 3)),
    "broadcast inputs": ([np.ones(6)[None, None, :], np.ones((4, 1, 6)), _G[:4, :5, :6]],
                         (4, 5, 6)),
    "fewer dimensions": ([np.arange(6.0), _G[0, :, :6]], (7, 6)),
    "a transposed view": ([_G.transpose(2, 0, 1)[:, 1:, :], _G[:, 1:, :].copy()[:6, :, :7]],
                          (8, 5, 7)),
    "an int32 view": ([np.arange(60, dtype=np.int32).reshape(6, 10)[:, ::3]], (6, 4)),
    "a Fortran-ordered owner": ([np.asfortranarray(_G)[1:, :, :]], (5, 7, 8)),
    "a complex block's real part": ([_Z.real[:, 1:], _Z.imag[:, 1:]], (5, 7)),
    "a misaligned offset": ([np.ndarray((9,), np.float64, buffer=np.zeros(12), offset=4)],
                            (9,)),
    "a 0-d input": ([np.array(3.0), _G[0]], (7, 8)),
    "nothing": ([], (3,)),
}


def _reference(vals, shape):
    keep = fused._strided_inputs_c
    fused._strided_inputs_c = None
    try:
        return fused.strided_inputs(vals, shape)
    finally:
        fused._strided_inputs_c = keep


@C_ONLY
@pytest.mark.parametrize("case", sorted(CASES))
def test_strided_inputs_in_c_equal_the_python_reference(case):
    vals, shape = CASES[case]
    want = _reference(vals, shape)
    got = native.ext.strided_inputs(vals, shape)
    if got is NotImplemented:        # (the caller then runs the reference)
        assert case == "a complex block's real part"
        got = fused.strided_inputs(vals, shape)
    if want is None:
        assert got is None
        return
    bufs, table = got
    assert table.dtype == want[1].dtype == np.uint64
    np.testing.assert_array_equal(table, want[1])
    assert len(bufs) == len(want[0])
    for b, w in zip(bufs, want[0]):
        assert b.__array_interface__ == w.__array_interface__
        assert b.dtype == w.dtype


@C_ONLY
def test_the_cases_cover_what_the_reference_refuses_and_accepts():
    results = {c: _reference(*CASES[c]) for c in CASES}
    assert results["a Fortran-ordered owner"] is None
    assert results["a misaligned offset"] is None
    assert results["stencil views"] is not None


@C_ONLY
@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "nothing"))
def test_stride_classes_in_c_equal_the_python_reference(case, monkeypatch):
    vals, shape = CASES[case]
    got = _reference(vals, shape)
    if got is None:
        return
    table = got[1]
    for column in range(table.shape[1]):
        c = tree._stride_classes(table, column)
        monkeypatch.setattr(native, "ext", None)
        py = tree._stride_classes(table, column)
        monkeypatch.undo()
        assert c == py and len(c) == len(vals)


@C_ONLY
def test_type_keys_in_c_equal_the_python_reference():
    ro = np.arange(4.0)
    ro.flags.writeable = False
    args = [np.zeros(3), np.zeros((2, 3), order="F"), _G[:, ::2], ro,
            np.frombuffer(np.zeros(9).tobytes()[1:], np.float64, 8), np.zeros(0, np.int64),
            (4, 5), ((1, 2), 3.0), 7, 2.5, True, np.float32(1), "s", None]
    assert native.ext.type_key(args) == cpu._type_keys_py(args)
    assert native.ext.type_key(()) == ()


def _random_tree(rng, n_ops):
    """A pending tree recorded under policy lazy: elementwise ops on a few computed inputs
    and on earlier results (some read twice: a DAG), with constants mixed in."""
    xs = [lazynp.asarray(rng.random((3, 4))) for _ in range(3)]
    nodes = list(xs)
    with lazynp.policy("lazy"):
        for _ in range(n_ops):
            a = nodes[rng.integers(len(nodes))]
            b = nodes[rng.integers(len(nodes))] if rng.random() < 0.7 else float(rng.random())
            nodes.append(a * b + 0.5 if rng.random() < 0.5 else a - b)
    return nodes[-1]


@C_ONLY
@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("once", [False, True])
def test_a_trees_walk_in_c_equals_the_python_reference(seed, once):
    # (kernels/tree.py's walk and dag: the kernel's order and its repeated reads)
    head = _random_tree(np.random.default_rng(seed), 4 + seed)._node()
    t = head.tree
    assert t is not None
    ins = t[1]
    want = tree._post_order_py(head, ins, once)
    got = native.ext.post_order(head, ins, once)
    assert [id(n) for n in got[0]] == [id(n) for n in want[0]]
    assert got[1] == want[1]
    assert want[0][-1] is head
    walked = tree._post_order_py(head, ins, False)[0]
    assert len(walked) == t[4]          # (the tree's size counts a repeated node each time)
    assert len(want[0]) == (len(walked) if not once else len({id(n) for n in walked}))


@C_ONLY
def test_view_nodes_and_their_values_in_c_equal_the_python_references():
    # (recorder.view_node and nodes.value_of run for every view a tree kernel reads)
    from lazynp.core import nodes, recorder
    base = lazynp.array(np.arange(6 * 7 * 8, dtype=np.float64).reshape(6, 7, 8))._node()
    assert base.state == nodes.DONE
    geometries = [(8 * 9, (4, 5, 6), (7 * 8 * 8, 8 * 8, 8)),      # a stencil's inner block
                  (8 * 8 * 7 * 6 - 8, (3, 4), (-7 * 8 * 8 * 2, -8)),  # negative strides
                  (0, (6, 1, 8), (7 * 8 * 8, 0, 8))]                 # a broadcast axis
    for offset, shape, strides in geometries:
        uses = base.use_count
        got = native.ext.view_node(base, offset, shape, strides, base.dtype)
        want = recorder._view_node_py(base, offset, shape, strides, base.dtype)
        assert base.use_count == uses + 2
        assert (got.op, got.args, got.params, got.shape, got.dtype, got.state) == \
            (want.op, want.args, want.params, want.shape, want.dtype, want.state)
        a, b = native.ext.value_of(got), nodes._value_of_py(want)
        assert (a.shape, a.strides, a.dtype, a.flags.writeable) == \
            (b.shape, b.strides, b.dtype, b.flags.writeable)
        assert np.shares_memory(a, base.value)
        np.testing.assert_array_equal(a, b)
    assert native.ext.value_of(1.5) == 1.5 and native.ext.value_of(base) is base.value


@C_ONLY
def test_merging_a_trees_inputs_in_c_equals_the_python_reference():
    rng = np.random.default_rng(1)
    pool = [lazynp.array(np.ones(3))._node() for _ in range(6)]
    for _ in range(50):
        ins = tuple(pool[k] for k in rng.permutation(6)[:rng.integers(0, 5)])
        more = tuple(pool[k] for k in rng.permutation(6)[:rng.integers(1, 5)])
        got, want = native.ext.merge_inputs(ins, more), tree.merge_inputs(ins, more)
        assert [id(x) for x in got[0]] == [id(x) for x in want[0]] and got[1] == want[1]

"""``lazynp.explain`` says, for each pair of adjacent ops that would not share a fused kernel,
why not, with the reason the fusion pass recorded where it decided (``fuse(..., why=)``):
different shapes, a reduction ending its kernel, an op without a kernel, a value read through
a view or a view of a value the kernel writes, a value computed earlier (read by Python), a
small flush, a jit plan's reductions.  The arrays are 500x400 (above the size from which a
flush runs the fusion pass)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy
import pytest

import lazynp as np
from lazynp.core import fusion, graph
from lazynp.ir.passes import pipeline

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def a():
    with np.policy("lazy"):
        yield np.asarray(numpy.random.default_rng(0).random((500, 400)))


def _notes(*arrays) -> dict:
    """``(producer op, consumer op) -> reason`` of every boundary."""
    ex = np.explain(*arrays)
    out = {}
    for b in ex.boundaries:
        key = (ex.rows[b["producer"]]["op"], ex.rows[b["consumer"]]["op"])
        assert key not in out, key
        out[key] = b["reason"]
    return out


def test_different_shapes(a):
    u = np.asarray(numpy.ones(400)) + 1.0          # 400 elements
    v = a * u                                      # 500x400
    assert _notes(v) == {("add", "multiply"): "different shapes (400 vs 500x400): a kernel "
                                               "loops over one shape"}


def test_a_reduction_ends_its_kernel(a):
    s = (a * 2.0).sum(axis=1)
    t = s + 1.0
    notes = _notes(t)
    assert notes == {("sum", "add"): "a reduction (sum) ends its kernel: its result is "
                                     "complete only after the whole loop"}
    assert [[r["op"] for r in np.explain(t).rows if r["kernel"] == 1]] == [["multiply",
                                                                            "sum"]]


def test_a_reduction_closes_a_kernel_only_after_its_last_op(a):
    x = a * 2.0
    y = x + 1.0
    z = x.sum(axis=1)
    assert _notes(y, z) == {("multiply", "sum"): "a reduction closes a kernel only when it "
                                                 "reads the kernel's last op"}


def test_an_op_without_a_kernel(a):
    h = (a @ a.T) + 1.0
    assert _notes(h) == {("matmul", "add"): "matmul is a contraction op: it runs on its own, "
                                            "not in a fused kernel"}


def test_a_view_of_a_value_the_kernel_writes(a):
    c = a * 2.0
    d = c + c[::-1]
    assert _notes(d) == {("multiply", "add"): "it reads a view of multiply, a value the "
                                              "kernel writes"}


def test_a_value_read_through_a_view(a):
    f = (a * 3.0)[:, :10] + 1.0
    assert _notes(f) == {("multiply", "add"): "it reads multiply through a view (a slice, "
                                              "reshape or transpose): a kernel reads its own "
                                              "values only element by element"}


def test_a_value_read_by_python_is_an_input(a):
    p = a * 2.0
    float(p[0, 0])                                 # forces p
    q = p + 1.0
    notes = _notes(q)
    assert list(notes) == [("multiply", "add")]
    assert notes[("multiply", "add")].startswith("multiply was computed by an earlier flush "
                                                 "(its value was needed: read by Python")


def test_a_small_flush_has_no_fusion_pass():
    with np.policy("lazy"):
        s = np.asarray(numpy.ones(10))
        t = s * 2.0 + 1.0
    (reason,) = _notes(t).values()
    assert reason.startswith("a small flush (largest op 10 < ") and \
        reason.endswith("elements) runs without the fusion pass")


def test_a_jit_plan_runs_reductions_on_their_own():
    sym = np.trace(lambda x: np.tanh(x * 2.0 + 1.0).sum(axis=1), numpy.ones((4, 3)))
    assert _notes(sym) == {("tanh", "sum"): "a jit plan runs a reduction (sum) on its own, "
                                            "into a planned buffer"}


def test_fused_ops_have_no_note_and_every_boundary_has_a_recorded_reason(a):
    b = np.asarray(numpy.ones(400))
    c = np.tanh(a * 2.0 + b)
    d = (c * b).sum(axis=1) + 1.0
    e = (a @ a.T)[:, :400] * c
    f = np.sqrt(e[::2] + 1.0)
    ex = np.explain(d, f)
    in_kernel = {i: k for k, g in enumerate(ex.kernels) for i in g}
    assert ex.boundaries
    for bd in ex.boundaries:
        p, c_ = bd["producer"], bd["consumer"]
        assert in_kernel.get(p, -1) != in_kernel.get(c_, -2)
        assert bd["reason"] and "not recorded" not in bd["reason"], bd
    text = str(ex)
    assert text.count("  not fused: #") == len(ex.boundaries)


def test_recording_reasons_does_not_change_the_groups(a):
    b = np.asarray(numpy.ones(400))
    c = np.tanh(a * 2.0 + b)
    d = (c * b).sum(axis=1) + (a * 3.0)[:, 0]
    nodes = pipeline.to_nodes(np.explain(d).symbol)
    work = [(g, False) for g in nodes
            if g.op not in (graph.PLACEHOLDER, graph.LEAF, graph.VIEW)]

    def shape(items):
        return [[id(m) for m in it.nodes()] if type(it) is fusion.FusedGroup else id(it[0])
                for it in items]
    why: dict = {}
    assert shape(fusion.fuse(work, graph.Node, why=why)) == shape(fusion.fuse(work,
                                                                               graph.Node))
    assert why


def test_the_picture_carries_the_reasons_as_edge_tooltips(a):
    d = (a * 2.0).sum(axis=1) + 1.0
    ex = np.explain(d)
    root = ET.fromstring(ex.svg(engine="python"))
    tips = [p.find(SVG + "title").text for p in root.iter(SVG + "path")
            if "unfused" in p.get("class", "").split()]
    assert tips == ["not fused because a reduction (sum) ends its kernel: its result is "
                    "complete only after the whole loop"]
    assert 'tooltip="not fused because a reduction (sum)' in ex.to_dot()


def test_jit_explain_lists_why_its_ops_do_not_fuse():
    def f(x):
        return np.tanh(x * 2.0 + 1.0).sum(axis=1) @ x

    jf = np.jit(f)
    x = numpy.ones((4, 4))
    jf(x)
    html = jf.explain()._repr_html_()
    root = ET.fromstring(html)
    items = [li.text for li in root.iter("li")]
    assert any("tanh" in t and "sum" in t and "a jit plan runs a reduction (sum) on its own"
               in t for t in items), items
    assert any("matmul" in t and "matmul is a contraction op" in t for t in items), items
    tips = [p.find(SVG + "title").text for p in root.iter(SVG + "path")
            if "unfused" in p.get("class", "").split()]
    assert len(tips) == len(items)


def test_an_op_reading_a_kernels_value_and_its_reduction(a):
    w = a * 0.5 + 1.0
    s = w - w.max(axis=1, keepdims=True)
    assert _notes(s) == {
        ("add", "subtract"): "it also reads max, the reduction that ends that kernel "
                             "(complete only after its whole loop)",
        ("max", "subtract"): "a reduction (max) ends its kernel: its result is complete "
                             "only after the whole loop"}


def test_a_reduction_of_an_op_that_runs_alone_is_told_by_that_op(a):
    s = (a @ a.T).sum(axis=1)
    assert _notes(s) == {("matmul", "sum"): "matmul is a contraction op: it runs on its own, "
                                            "not in a fused kernel"}

"""Pictures and reports: lazynp.explain, the stats table, jit's explain, Symbol drawings."""
from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET

import numpy
import pytest
from hypothesis import given, settings, strategies as st

import lazynp as np
from lazynp.notebook import draw as _draw
from lazynp.core import graph
from lazynp.notebook.draw import layout as _layout

SVG = "{http://www.w3.org/2000/svg}"


def _pending(a) -> bool:
    # (a detached array, ``_v`` None, is a computed value: work run at once in C)
    return a._v is not None and a._v.head.state == graph.PENDING


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _nodes(svg_root):
    return [g for g in svg_root.iter(SVG + "g") if "node" in g.get("class", "").split()]


def test_explain_does_not_run_anything_and_lists_the_pending_ops():
    with np.policy("lazy"):
        a = np.ones((300, 400))
        b = (a * 2.0 + 1.0) * a
        c = b.sum()
    flushes = np.stats()["flushes"]
    ex = np.explain(c)
    assert np.stats()["flushes"] == flushes
    assert _pending(c) and _pending(b)
    ops = [r["op"] for r in ex.rows if r["state"] == "pending"]
    assert ops == ["ones", "multiply", "add", "multiply", "sum"]
    assert ex.num_pending == 5
    # the elementwise chain and its sum would run as one kernel
    assert len(ex.kernels) == 1
    assert [ex.symbol.nodes[i].op for i in ex.kernels[0]] == ["multiply", "add", "multiply",
                                                             "sum"]
    text = str(ex)
    assert "5 pending op(s)" in text and "kernel 1: multiply, add, multiply, sum" in text
    assert float(c) == pytest.approx(3.0 * 300 * 400)      # the values are still right


def test_explain_policy_column_follows_the_threshold():
    with np.policy("lazy"):
        small = np.ones(10) + 1
    with np.policy("lazy"):
        ex = np.explain(small)
        assert ex.rows[-1]["policy"] == "record (policy 'lazy')"
    ex = np.explain(small)
    assert ex.rows[-1]["policy"].startswith("at once (10 < ")
    big_n = np.core.policy.EAGER_MAX_ELEMS if hasattr(np, "core") else 1 << 19
    with np.policy("lazy"):
        big = np.ones(big_n) + 1
    assert np.explain(big).rows[-1]["policy"].startswith("record (")
    with np.policy("lazy"):
        m = np.ones((3, 3)) @ np.ones((3, 3))
    assert "fusion cannot improve" in np.explain(m).rows[-1]["policy"]


def test_explain_marks_forced_values_and_fallbacks():
    with np.policy("lazy"):
        x = np.arange(100_000.0)
        y = x * 2
        float(y[0])                          # forces y
        f = np.linalg.matrix_power(numpy.eye(2) * 2.0, 3)   # a NumPy fallback
        z = y + 1
        w = -f
    ex = np.explain(z, w)
    states = {r["op"]: r["state"] for r in ex.rows}
    assert states["multiply"] == "forced"
    assert states["numpy.linalg.matrix_power"] == "NumPy fallback"
    d = ex.drawing()
    marks = {n.title: n.marks for n in d.nodes}
    assert "forced" in marks["multiply"] and "fallback" in marks["numpy.linalg.matrix_power"]
    svg = ex.svg(engine="python")
    root = ET.fromstring(svg)
    strokes = {g.get("id"): [r.get("stroke") for r in g.iter(SVG + "rect")]
               for g in _nodes(root)}
    assert any("#ea580c" in s for s in strokes.values())          # fallback border
    assert any("#dc2626" in s for s in strokes.values())          # forced border
    assert "fallback" in ex.to_dot()


def test_explain_memory_plan_matches_the_planner_and_html_parses():
    with np.policy("lazy"):
        x = np.ones((200, 300))
        p = _softmax(x)
    ex = np.explain(p)
    plan = ex.symbol.memory_plan()
    assert ex.memory.planned_bytes == plan.planned_bytes
    assert ex.memory.planned_bytes < ex.memory.naive_bytes
    buffers = {r["buffer"] for r in ex.rows if r["buffer"] != ""}
    assert len(buffers) == plan.num_buffers
    root = ET.fromstring(ex._repr_html_())
    svgs = list(root.iter(SVG + "svg"))
    assert len(svgs) == 1 and len(_nodes(svgs[0])) == len(ex.symbol.nodes)
    rows = list(root.iter("tr"))
    assert len(rows) == len(ex.rows) + 1                      # + the header row


def test_explain_says_shared_buffers_run_at_once():
    a = np.asarray(numpy.ones((1000, 1000)))          # NumPy shares this buffer
    c = a * 2.0
    assert not _pending(c)                             # run at once, large as it is
    with np.policy("lazy"):
        d = a + 1.0
        assert np.explain(d).rows[-1]["policy"] == "record (policy 'lazy')"
    assert np.explain(d).rows[-1]["policy"] == "at once (reads a buffer NumPy shares)"


def test_explain_of_computed_arrays_and_bad_arguments():
    a = np.arange(5.0)
    ex = np.explain(a, numpy.ones(2))
    assert ex.num_pending == 0 and "nothing is pending" in str(ex)
    ET.fromstring(ex._repr_html_())
    with pytest.raises(TypeError, match="lazynp.explain: argument 0 is a str"):
        np.explain("x")


def test_stats_is_a_dict_with_tables():
    np.reset_stats()
    np.exp(np.ones(4))
    s = np.stats()
    assert isinstance(s, dict) and repr(s) == repr(dict(s))
    assert s["ops_eager"] >= 1
    text = str(s)
    assert re.search(rf"^ops_eager\s+{s['ops_eager']:,}\s+ops run at once", text, re.M)
    table = ET.fromstring(s._repr_html_())
    cells = [td.text for td in table.iter("td")]
    assert "ops_eager" in cells


def test_stats_table_lists_fallbacks_with_their_site():
    np.reset_stats()
    np.linalg.matrix_power(numpy.eye(2), 2)       # (the FFTs are lazy: not fallbacks)
    text = np.stats().table()
    assert "linalg.matrix_power" in text and "test_jupyter.py" in text


def test_jit_explain_is_a_string_with_a_picture():
    def layer(x, w):
        return np.tanh(x @ w + 1.0) * 2.0

    jf = np.jit(layer)
    jf(numpy.ones((4, 3)), numpy.ones((3, 2)))
    jf(numpy.ones((5, 3)), numpy.ones((3, 2)))
    text = jf.explain()
    assert isinstance(text, str) and repr(text) == str(text)
    assert "plan 2: signature changed: argument 0 (x) shape (4, 3) -> (5, 3)" in text
    root = ET.fromstring(text._repr_html_())
    assert len(list(root.iter(SVG + "svg"))) == 2
    assert len(list(root.iter("tr"))) == 3
    d = np.notebook.jupyter.plan_drawing(jf.plan_for(numpy.ones((4, 3)), numpy.ones((3, 2))))
    assert [[d.nodes[i].title for i in g] for g in d.groups] == [["add", "tanh", "multiply"]]


def test_symbol_pictures():
    def f(x, w):
        return _softmax(np.tanh(x @ w))

    sym = np.trace(f, numpy.ones((4, 3)), numpy.ones((3, 5)))
    root = ET.fromstring(sym.svg(engine="python"))
    nodes = _nodes(root)
    assert len(nodes) == len(sym.nodes)
    labels = [" ".join(t.text for t in g.iter(SVG + "text")) for g in nodes]
    assert "tanh 4\u00d75 float64" in labels and "x 4\u00d73 float64" in labels
    groups = [g for g in _draw.drawing_of_symbol(sym).groups]
    assert len(list(root.iter(SVG + "polygon"))) >= len(groups) >= 1
    dot = sym.to_dot()
    assert dot.count("subgraph cluster_fused") == len(groups)
    # buffers: boxes sharing a planned buffer share a fill colour
    plan = sym.memory_plan()
    fills = {}
    for i, g in enumerate(nodes):
        sid = plan.storage_of.get(i)
        if sid is not None:
            fills.setdefault(sid, set()).add(g.find(SVG + "rect[@class='box']").get("fill"))
    assert fills and all(len(v) == 1 for v in fills.values())
    assert len({next(iter(v)) for v in fills.values()}) == len(fills)
    ET.fromstring(sym._repr_html_())
    assert sym._repr_svg_().lstrip().startswith("<svg")


def _inside(pt, poly) -> bool:
    x, y = pt
    hit = False
    for (x0, y0), (x1, y1) in zip(poly, poly[1:] + poly[:1]):
        if (y0 > y) != (y1 > y) and x < x0 + (y - y0) * (x1 - x0) / (y1 - y0):
            hit = not hit
    return hit


@st.composite
def _dags(draw):
    n = draw(st.integers(2, 14))
    edges = sorted({(a, b) for b in range(1, n)
                    for a in draw(st.lists(st.integers(0, b - 1), max_size=3))})
    groups, used = [], set()
    for _ in range(draw(st.integers(0, 2))):
        start = draw(st.integers(0, n - 1))
        members = [start]
        for a, b in edges:          # a chain of consumers
            if a == members[-1] and b not in used:
                members.append(b)
        members = [m for m in members if m not in used]
        if len(members) > 1:
            groups.append(members)
            used.update(members)
    return n, edges, groups


@settings(max_examples=30, deadline=None)
@given(_dags())
def test_layout_keeps_boxes_apart_and_groups_around_their_members(dag):
    n, edges, groups = dag
    d = _draw.Drawing([_draw.DrawnNode(f"op{i}", "3x4 float64") for i in range(n)], edges, groups)
    group_of = {i: k for k, g in enumerate(groups) for i in g}
    boxes, routes, _, _ = _layout.layout(d, group_of)
    for a, b in edges:
        assert boxes[a].y < boxes[b].y                        # edges point down
    for i in range(n):
        for j in range(i + 1, n):
            p, q = boxes[i], boxes[j]
            if p.layer == q.layer:
                assert abs(p.x - q.x) >= (p.w + q.w) / 2    # no overlap in a layer
    from lazynp.notebook.draw.render import _group_outline
    for k, members in enumerate(groups):
        outlines = _group_outline(members, boxes)
        for i in range(n):
            c = (boxes[i].x, boxes[i].y)
            inside = any(_inside(c, poly) for poly in outlines)
            assert inside == (i in members)
    ET.fromstring(_draw.to_svg(d, engine="python"))


def test_explain_of_a_symbol_gives_its_kernels_and_memory_table():
    sym = np.trace(lambda x: np.tanh(x * 2.0 + 1.0).sum(axis=1), numpy.ones((4, 3)))
    ex = np.explain(sym)
    assert ex.is_symbol and ex.symbol is sym
    # as jit compiles it: the elementwise chain is one kernel, the reduction runs alone
    assert [[sym.nodes[i].op for i in g] for g in ex.kernels] == [["multiply", "add", "tanh"]]
    plan = sym.memory_plan()
    assert ex.memory.planned_bytes == plan.planned_bytes
    assert all(r["policy"] == "" for r in ex.rows)
    assert str(ex).startswith("lazynp.explain: Symbol with 4 op(s), inputs ['x']")
    ET.fromstring(ex._repr_html_())


def test_large_graphs_show_their_table_without_a_picture():
    with np.policy("lazy"):
        x = np.ones(10)
        for _ in range(np.notebook.explain.MAX_DRAWN_NODES):
            x = x + 1.0
    ex = np.explain(x)
    root = ET.fromstring(ex._repr_html_())
    assert not list(root.iter(SVG + "svg")) and "too many to draw" in ex._repr_html_()
    assert len(list(root.iter("tr"))) == len(ex.rows) + 1
    assert float(x[0]) == 1.0 + np.notebook.explain.MAX_DRAWN_NODES


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graphviz_pictures_parse_and_box_the_kernels():
    sym = np.trace(lambda x: np.tanh(x * 2.0 + 1.0).sum(axis=1) * 3.0, numpy.ones((4, 3)))
    root = ET.fromstring(_draw.to_svg(sym.drawing(), engine="dot"))
    clusters = [g for g in root.iter(SVG + "g") if g.get("class") == "cluster"]
    nodes = [g for g in root.iter(SVG + "g") if g.get("class") == "node"]
    assert len(clusters) == len(sym.drawing().groups) == 1
    assert len(nodes) == len(sym.nodes)


# --- labels clear of edges, a legend entry for every fill ----------------------------------

def _edge_points(d: str, samples: int = 64) -> list:
    """Points along an SVG path of ``M x y`` then cubic ``C`` segments."""
    nums = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", d)]
    x, y = nums[0], nums[1]
    pts = [(x, y)]
    rest = nums[2:]
    for k in range(0, len(rest), 6):
        x1, y1, x2, y2, x3, y3 = rest[k:k + 6]
        for s in range(1, samples + 1):
            t = s / samples
            u = 1 - t
            pts.append((u ** 3 * x + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t ** 3 * x3,
                        u ** 3 * y + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t ** 3 * y3))
        x, y = x3, y3
    return pts


def _segment_hits_box(p, q, box) -> bool:
    """Whether segment ``p``-``q`` meets the rectangle ``(x0, y0, x1, y1)`` (Liang-Barsky)."""
    x0, y0, x1, y1 = box
    (px, py), (qx, qy) = p, q
    dx, dy = qx - px, qy - py
    lo, hi = 0.0, 1.0
    for den, num in ((-dx, px - x0), (dx, x1 - px), (-dy, py - y0), (dy, y1 - py)):
        if den == 0:
            if num < 0:
                return False
        else:
            t = num / den
            if den < 0:
                lo = max(lo, t)
            else:
                hi = min(hi, t)
    return lo <= hi


def _label_boxes(root) -> list:
    return [tuple(float(v) for v in t.get("data-box").split())
            for t in root.iter(SVG + "text") if t.get("class") == "group-label"]


def _assert_labels_clear(root) -> None:
    labels = _label_boxes(root)
    edges = [_edge_points(p.get("d")) for p in root.iter(SVG + "path")
             if "edge" in p.get("class", "").split()]
    boxes = [tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
             for g in _nodes(root) for r in [g.find(SVG + "rect[@class='box']")]]
    for lb in labels:
        for pts in edges:
            assert not any(_segment_hits_box(p, q, lb) for p, q in zip(pts, pts[1:])), lb
        for x, y, w, h in boxes:
            assert x + w <= lb[0] or lb[2] <= x or y + h <= lb[1] or lb[3] <= y, lb


@settings(max_examples=40, deadline=None)
@given(_dags())
def test_fused_kernel_labels_cross_no_edge_and_no_box(dag):
    n, edges, groups = dag
    d = _draw.Drawing([_draw.DrawnNode(f"op{i}", "3x4 float64") for i in range(n)], edges,
                      groups)
    root = ET.fromstring(_draw.to_svg(d, engine="python"))
    assert len(_label_boxes(root)) == len(groups)
    _assert_labels_clear(root)
    # each label lies inside its own kernel's outline
    polys = [[tuple(map(float, p.split(","))) for p in poly.get("points").split()]
             for poly in root.iter(SVG + "polygon") if poly.get("class") == "fused-group"]
    for x0, y0, x1, y1 in _label_boxes(root):
        assert any(_inside(((x0 + x1) / 2, (y0 + y1) / 2), poly) for poly in polys)


def test_an_edge_into_a_kernels_first_op_no_longer_crosses_its_label():
    """The case of the report: an edge from above into the kernel's first, leftmost op
    passed through the label, which sat at the kernel's top-left corner."""
    sym = np.trace(lambda x, y: np.tanh(x * 2.0 + y) * 3.0 + (x @ y).sum(),
                   numpy.ones((4, 4)), numpy.ones((4, 4)))
    root = ET.fromstring(sym.svg(engine="python"))
    assert _label_boxes(root)
    _assert_labels_clear(root)


def _legend_texts(root) -> list:
    return [t.text for t in root.iter(SVG + "text") if t.get("font-size") == "11"]


def test_every_fill_of_the_jit_picture_has_a_legend_entry():
    def f(x, y):
        a = np.exp(x) * 2 + y
        return np.tanh(a.sum(axis=1)) + 1, a.T @ y

    jf = np.jit(f)
    x, y = numpy.random.rand(100, 100), numpy.random.rand(100, 100)
    jf(x, y)
    d = np.notebook.jupyter.plan_drawing(jf.plan_for(x, y), "plan 1")
    root = ET.fromstring(_draw.to_svg(d, engine="python"))
    legend = _legend_texts(root)
    fills = {g.find(SVG + "rect[@class='box']").get("fill"): g.get("class").split()[1]
             for g in _nodes(root)}
    from lazynp.notebook.draw import render
    # the light grey boxes (no planned buffer: inside a kernel, or a new output) are there...
    assert render.PLAIN_FILL in fills
    # ... and explained, as the coloured ones are
    assert "no planned buffer (a new output, or inside a fused kernel)" in legend
    assert any(t.startswith("colour = planned buffer") for t in legend)
    swatches = {r.get("fill") for r in root.iter(SVG + "rect") if r.get("height") == "12"}
    assert render.PLAIN_FILL in swatches
    assert "light grey: no planned buffer" in _draw.to_dot(d)

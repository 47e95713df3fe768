"""A layered (Sugiyama-style) layout in pure Python, for when Graphviz is not installed.

Layers are longest paths from the inputs; the order inside a layer comes from a few
barycentre sweeps (down, then up) and keeps the members of a fusion group next to each
other, so that a group can be outlined without enclosing other nodes of its layers.
"""
from __future__ import annotations

from dataclasses import dataclass

CHAR_W = 7.0          # average glyph width of the 12px sans-serif labels
NODE_H = 36.0         # two lines of text
H_GAP = 22.0          # between neighbours in a layer
GROUP_GAP = 14.0      # extra, where a fusion group starts or ends
V_GAP = 34.0          # between layers
MARGIN = 16.0
SWEEPS = 4


@dataclass
class Box:
    x: float          # centre
    y: float          # centre
    w: float
    h: float
    layer: int


def node_width(title: str, detail: str) -> float:
    return max(len(title), len(detail), 4) * CHAR_W + 18.0


def _layers(n: int, edges: list) -> list:
    preds = [[] for _ in range(n)]
    succs = [[] for _ in range(n)]
    indeg = [0] * n
    for a, b in edges:
        preds[b].append(a)
        succs[a].append(b)
        indeg[b] += 1
    layer = [0] * n
    ready = [i for i in range(n) if indeg[i] == 0]
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for s in succs[i]:
            layer[s] = max(layer[s], layer[i] + 1)
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if seen != n:
        raise ValueError("lazynp drawing: the graph has a cycle")
    return layer, preds, succs


DUMMY_W = 8.0        # a long edge's bend point inside a layer it passes through


def layout(drawing, group_of: dict | None = None, lead: dict | None = None) -> tuple:
    """``(boxes, routes, width, height)``: index-aligned boxes of the drawing's nodes, and
    for each edge the bend points ``[(x, y), ...]`` where it crosses intermediate layers
    (edges spanning several layers are routed around the nodes between).

    ``lead``: group -> width of free room left before the group's leftmost member in its
    first layer (where a picture writes the group's label: no box, and no edge, since
    edges meet boxes only at their top and bottom and cross a layer only at a bend point
    of their own)."""
    nodes = drawing.nodes
    n = len(nodes)
    if n == 0:
        return [], [[] for _ in drawing.edges], 2 * MARGIN, 2 * MARGIN
    group_of = group_of or {}
    lead = lead or {}
    layer, _, _ = _layers(n, drawing.edges)
    first_layer: dict = {}
    for i, g in group_of.items():
        first_layer[g] = min(first_layer.get(g, layer[i]), layer[i])
    # split long edges with bend points (dummy nodes, one per intermediate layer)
    total = n
    chains = []
    preds = [[] for _ in range(n)]
    succs = [[] for _ in range(n)]
    for a, b in drawing.edges:
        chain = []
        prev = a
        for li in range(layer[a] + 1, layer[b]):
            d = total
            total += 1
            layer.append(li)
            preds.append([])
            succs.append([])
            chain.append(d)
            preds[d].append(prev)
            succs[prev].append(d)
            prev = d
        preds[b].append(prev)
        succs[prev].append(b)
        chains.append(chain)
    nl = max(layer) + 1
    rows = [[] for _ in range(nl)]
    for i in range(total):
        rows[layer[i]].append(i)
    frac = {}

    def place(row):
        for k, i in enumerate(row):
            frac[i] = (k + 0.5) / len(row)

    for row in rows:
        place(row)

    def reorder(row, nbrs):
        bary = {}
        for i in row:
            ns = nbrs[i]
            bary[i] = sum(frac[j] for j in ns) / len(ns) if ns else frac[i]
        gbary: dict = {}
        for i in row:
            g = group_of.get(i)
            if g is not None:
                gbary.setdefault(g, []).append(bary[i])

        def key(i):
            g = group_of.get(i)
            if g is None:
                return (bary[i], -1, bary[i])
            vals = gbary[g]
            return (sum(vals) / len(vals), g, bary[i])
        row.sort(key=key)
        place(row)

    for _ in range(SWEEPS):
        for row in rows[1:]:
            reorder(row, preds)
        for row in reversed(rows[:-1]):
            reorder(row, succs)
    boxes: list = [None] * total
    widths = []
    for li, row in enumerate(rows):
        x = 0.0
        prev_g = None
        for k, i in enumerate(row):
            g = group_of.get(i)
            if k:
                x += H_GAP + (GROUP_GAP if g != prev_g else 0.0)
            if g is not None and g != prev_g and first_layer.get(g) == li:
                x += lead.get(g, 0.0)
            w = node_width(nodes[i].title, nodes[i].detail) if i < n else DUMMY_W
            boxes[i] = Box(x + w / 2, MARGIN + NODE_H / 2 + li * (NODE_H + V_GAP), w,
                           NODE_H, li)
            x += w
            prev_g = g
        widths.append(x)
    width = max(widths) + 2 * MARGIN + 2 * GROUP_GAP
    for li, row in enumerate(rows):
        shift = (width - widths[li]) / 2
        for i in row:
            boxes[i].x += shift
    height = MARGIN * 2 + nl * NODE_H + (nl - 1) * V_GAP + 14.0
    routes = [[(boxes[d].x, boxes[d].y) for d in chain] for chain in chains]
    return boxes[:n], routes, width, height

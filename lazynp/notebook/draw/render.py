"""Write a :class:`~.model.Drawing` as Graphviz DOT or as SVG.

Legend: boxes are ops (``title`` = op, then shape and dtype), blue pills are inputs, dashed
boxes constants; a box's fill colour is its planned buffer (boxes of one colour share one
buffer; light grey: none, a new output or a value inside a fused kernel); a dashed violet
outline encloses one fused kernel, its label left of the kernel's first row (where no edge
passes); a red border marks a node that a flush computed (forced), an orange dashed border
a NumPy fallback; outputs have a double border.  An edge between two ops that do not fuse
carries the reason as its tooltip (``Drawing.edge_notes``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from xml.sax.saxutils import escape

from . import layout as _layout

#: fill colours of planned buffers (pastel, distinguishable; cycled past 12 buffers)
PALETTE = ("#fde68a", "#bbf7d0", "#bfdbfe", "#fbcfe8", "#ddd6fe", "#fed7aa", "#a5f3fc",
           "#d9f99d", "#fecaca", "#c7d2fe", "#e9d5ff", "#99f6e4")
INPUT_FILL, INPUT_STROKE = "#dbeafe", "#1d4ed8"
PLAIN_FILL = "#f5f5f5"
COMPUTED_FILL = "#e5e7eb"
GROUP_COLOR = "#7c3aed"
FORCED_COLOR = "#dc2626"
FALLBACK_COLOR = "#ea580c"
FONT = "Helvetica, Arial, sans-serif"
LABEL_FONT = 9.0      # a fused group's "fused kernel k" label, left of its first row
LABEL_CHAR_W = 5.4    # average glyph width of that label


def _colour_index(drawing) -> dict:
    """storage id -> palette index, in order of first appearance."""
    out: dict = {}
    for n in drawing.nodes:
        if n.buffer is not None and n.buffer not in out:
            out[n.buffer] = len(out)
    return out


def _fill(node, colours) -> str:
    if node.kind == "input":
        return INPUT_FILL
    if node.kind == "const":
        return "#ffffff"
    if node.buffer is not None:
        return PALETTE[colours[node.buffer] % len(PALETTE)]
    return PLAIN_FILL


def _group_of(drawing) -> dict:
    return {i: g for g, members in enumerate(drawing.groups) for i in members}


# --- DOT ---------------------------------------------------------------------------------

def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_DOT_LEGEND = {"group": "dashed outline: fused kernel", "forced": "red border: forced",
               "fallback": "orange border: NumPy fallback", "computed": "grey: computed value",
               "output": "double border: output",
               "unbuffered": "light grey: no planned buffer"}


def to_dot(drawing, name: str = "lazynp") -> str:
    """Graphviz DOT source: fusion groups are clusters, fill colours are buffers."""
    colours = _colour_index(drawing)
    lines = [f"digraph {json.dumps(name)} {{", '  rankdir=TB; fontname="Helvetica";',
             f'  node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", '
             f'fillcolor="{PLAIN_FILL}"];', '  edge [color="#666666", arrowsize=0.7];']
    legend = "  \u00b7  ".join(_DOT_LEGEND.get(kind, text) for kind, text in drawing.legend())
    label = "\n".join(t for t in (drawing.title, legend) if t)
    if label:
        lines.append(f"  label={_dot_str(label)}; labelloc=t; fontsize=10;")

    def node_line(i, n):
        fill = COMPUTED_FILL if ("computed" in n.marks and n.kind == "input") else \
            _fill(n, colours)
        attrs = [f"label={_dot_str(n.title + chr(10) + n.detail)}", f'fillcolor="{fill}"']
        style = ["filled"]
        if n.kind == "input":
            attrs.append("shape=ellipse")
            attrs.append(f'color="{INPUT_STROKE}"')
        elif n.kind == "const":
            style.append("dashed")
        else:
            style.append("rounded")
        if n.kind == "view":
            style.append("dotted")
        if "forced" in n.marks:
            attrs += [f'color="{FORCED_COLOR}"', "penwidth=2.5"]
        if "fallback" in n.marks:
            attrs += [f'color="{FALLBACK_COLOR}"', "penwidth=2.5"]
            style.append("dashed")
        if "output" in n.marks:
            attrs.append("peripheries=2")
        attrs.append(f"style={_dot_str(','.join(dict.fromkeys(style)))}")
        if n.note:
            attrs.append(f"tooltip={_dot_str(n.note)}")
        return f"n{i} [{', '.join(attrs)}];"

    grouped = _group_of(drawing)
    for g, members in enumerate(drawing.groups):
        lines.append(f"  subgraph cluster_fused{g} {{")
        lines.append(f'    label="fused kernel {g + 1}"; fontname="Helvetica"; fontsize=9; '
                     f'style="dashed,rounded"; color="{GROUP_COLOR}"; fontcolor="{GROUP_COLOR}";')
        for i in members:
            lines.append("    " + node_line(i, drawing.nodes[i]))
        lines.append("  }")
    for i, n in enumerate(drawing.nodes):
        if i not in grouped:
            lines.append("  " + node_line(i, n))
    for a, b in drawing.edges:
        note = drawing.edge_notes.get((a, b))
        lines.append(f"  n{a} -> n{b}" + (f" [tooltip={_dot_str(note)}]" if note else "")
                     + ";")
    lines.append("}")
    return "\n".join(lines)


def dot_svg(drawing) -> str | None:
    """SVG from Graphviz's ``dot`` (None when it is not installed or fails)."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    try:
        res = subprocess.run([exe, "-Tsvg"], input=to_dot(drawing).encode("utf-8"),
                             capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    svg = res.stdout.decode("utf-8", "replace")
    return svg[svg.find("<svg"):].replace("<svg", '<svg class="lazynp-graph"', 1)


# --- SVG (own layout) --------------------------------------------------------------------

def group_label(g: int) -> str:
    return f"fused kernel {g + 1}"


def label_width(g: int) -> float:
    """Room the label of group ``g`` takes left of the group's first row."""
    return len(group_label(g)) * LABEL_CHAR_W + 8.0


def label_box(members, boxes, g: int, pad: float = 7.0) -> tuple:
    """``(x0, y0, x1, y1)`` of group ``g``'s label: in the room the layout left before the
    leftmost member of the group's first layer, centred on that row."""
    top = min(boxes[i].layer for i in members)
    first = min((boxes[i] for i in members if boxes[i].layer == top), key=lambda b: b.x)
    x0 = first.x - first.w / 2 - label_width(g) - pad + 4.0
    return (x0, first.y - LABEL_FONT / 2 - 2.0, x0 + len(group_label(g)) * LABEL_CHAR_W,
            first.y + LABEL_FONT / 2 + 2.0)


def _group_outline(members, boxes, pad: float = 7.0, lead: float = 0.0) -> list:
    """Rectilinear outlines (point lists) around a group, one per run of adjacent layers;
    ``lead``: extra room enclosed left of the group's first layer (its label's)."""
    by_layer: dict = {}
    for i in members:
        b = boxes[i]
        lo, hi = by_layer.get(b.layer, (float("inf"), float("-inf")))
        by_layer[b.layer] = (min(lo, b.x - b.w / 2 - pad), max(hi, b.x + b.w / 2 + pad))
    top_layer = min(by_layer)
    lo, hi = by_layer[top_layer]
    by_layer[top_layer] = (lo - lead, hi)
    ys = {boxes[i].layer: boxes[i].y for i in members}
    half = boxes[members[0]].h / 2
    gap = _layout.V_GAP
    runs, run = [], []
    for layer in sorted(by_layer):
        if run and layer != run[-1] + 1:
            runs.append(run)
            run = []
        run.append(layer)
    runs.append(run)
    outlines = []
    for run in runs:
        top = {layer: ys[layer] - half - (pad if k == 0 else gap / 2)
               for k, layer in enumerate(run)}
        bot = {layer: ys[layer] + half + (pad if k == len(run) - 1 else gap / 2)
               for k, layer in enumerate(run)}
        right = [p for layer in run for p in ((by_layer[layer][1], top[layer]),
                                              (by_layer[layer][1], bot[layer]))]
        left = [p for layer in reversed(run) for p in ((by_layer[layer][0], bot[layer]),
                                                       (by_layer[layer][0], top[layer]))]
        outlines.append(right + left)
    return outlines


def _f(v: float) -> str:
    return f"{v:.1f}"


def layout_svg(drawing) -> str:
    """SVG drawn with the pure-Python layered layout (no system package needed)."""
    colours = _colour_index(drawing)
    group_of = _group_of(drawing)
    lead = {g: label_width(g) for g in range(len(drawing.groups))}
    boxes, routes, width, height = _layout.layout(drawing, group_of, lead)
    legend = drawing.legend()
    head = 26.0 if (drawing.title or legend) else 0.0
    legend_w = sum(len(t) * 6.5 + 34 for _, t in legend) + len(drawing.title) * 7.5 + 24
    width = max(width, legend_w)
    if boxes:
        # centre the graph in the (possibly wider) picture
        gw = max(b.x + b.w / 2 for b in boxes) + min(b.x - b.w / 2 for b in boxes)
        dx = (width - gw) / 2
        for b in boxes:
            b.x += dx
            b.y += head
        routes = [[(x + dx, y + head) for x, y in r] for r in routes]
    height += head
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(height)}" '
           f'viewBox="0 0 {_f(width)} {_f(height)}" font-family="{FONT}" font-size="12" '
           f'class="lazynp-graph">',
           '<defs><marker id="lazynp-arrow" viewBox="0 0 10 10" refX="10" refY="5" '
           'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
           '<path d="M 0 0 L 10 5 L 0 10 z" fill="#666666"/></marker></defs>',
           f'<rect x="0" y="0" width="{_f(width)}" height="{_f(height)}" fill="#ffffff"/>']
    x = 10.0
    if drawing.title:
        out.append(f'<text x="{_f(x)}" y="18" font-weight="bold">{escape(drawing.title)}</text>')
        x += len(drawing.title) * 7.5 + 16
    for kind, text in legend:
        out.append(_legend_swatch(kind, x, 8.0))
        out.append(f'<text x="{_f(x + 20)}" y="18" font-size="11">{escape(text)}</text>')
        x += len(text) * 6.5 + 34
    for g, members in enumerate(drawing.groups):
        for pts in _group_outline(members, boxes, lead=lead[g]):
            path = " ".join(f"{_f(px)},{_f(py)}" for px, py in pts)
            out.append(f'<polygon class="fused-group" points="{path}" fill="{GROUP_COLOR}" '
                       f'fill-opacity="0.06" stroke="{GROUP_COLOR}" stroke-dasharray="5,3" '
                       f'stroke-width="1.2"/>')
        x0, y0, x1, y1 = label_box(members, boxes, g)
        out.append(f'<text class="group-label" x="{_f(x0)}" y="{_f(y1 - 2.0 - 1.0)}" '
                   f'font-size="{LABEL_FONT:g}" fill="{GROUP_COLOR}" '
                   f'data-box="{_f(x0)} {_f(y0)} {_f(x1)} {_f(y1)}">'
                   f'{escape(group_label(g))}</text>')
    for (a, b), bends in zip(drawing.edges, routes):
        p, q = boxes[a], boxes[b]
        pts = [(p.x, p.y + p.h / 2)] + bends + [(q.x, q.y - q.h / 2 - 1)]
        d = [f"M {_f(pts[0][0])} {_f(pts[0][1])}"]
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            mid = (y0 + y1) / 2
            d.append(f"C {_f(x0)} {_f(mid)} {_f(x1)} {_f(mid)} {_f(x1)} {_f(y1)}")
        path = " ".join(d)
        note = drawing.edge_notes.get((a, b))
        if note:
            out.append(f'<path class="edge unfused" d="{path}" fill="none" '
                       f'stroke="#666666" stroke-width="1" marker-end="url(#lazynp-arrow)">'
                       f'<title>{escape(note)}</title></path>')
        else:
            out.append(f'<path class="edge" d="{path}" fill="none" stroke="#666666" '
                       f'stroke-width="1" marker-end="url(#lazynp-arrow)"/>')
    for i, (n, b) in enumerate(zip(drawing.nodes, boxes)):
        out.append(_node_svg(i, n, b, colours))
    out.append("</svg>")
    return "\n".join(out)


def _legend_swatch(kind: str, x: float, y: float) -> str:
    if kind == "group":
        return (f'<rect x="{_f(x)}" y="{_f(y)}" width="16" height="12" fill="{GROUP_COLOR}" '
                f'fill-opacity="0.06" stroke="{GROUP_COLOR}" stroke-dasharray="3,2"/>')
    stroke, dash, fill = "#555555", "", PLAIN_FILL
    if kind == "forced":
        stroke = FORCED_COLOR
    elif kind == "fallback":
        stroke, dash = FALLBACK_COLOR, ' stroke-dasharray="3,2"'
    elif kind == "computed":
        fill = COMPUTED_FILL
    elif kind == "unbuffered":
        fill = PLAIN_FILL
    elif kind == "buffer":
        return "".join(f'<rect x="{_f(x + 6 * k)}" y="{_f(y)}" width="6" height="12" '
                       f'fill="{PALETTE[k]}"/>' for k in range(3))
    width = "2" if kind in ("forced", "fallback") else "1"
    extra = ""
    if kind == "output":
        extra = (f'<rect x="{_f(x - 2)}" y="{_f(y - 2)}" width="20" height="16" rx="4" '
                 f'fill="none" stroke="#555555"/>')
    return extra + (f'<rect x="{_f(x)}" y="{_f(y)}" width="16" height="12" rx="3" '
                    f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"{dash}/>')


def _node_svg(i: int, n, b, colours) -> str:
    x0, y0 = b.x - b.w / 2, b.y - b.h / 2
    stroke, sw, dash = "#555555", 1.0, ""
    rx = b.h / 2 if n.kind == "input" else 6.0
    if n.kind == "input":
        stroke = INPUT_STROKE
    if n.kind == "const":
        dash = ' stroke-dasharray="4,3"'
    if n.kind == "view":
        dash = ' stroke-dasharray="2,2"'
    if "forced" in n.marks:
        stroke, sw = FORCED_COLOR, 2.5
    if "fallback" in n.marks:
        stroke, sw, dash = FALLBACK_COLOR, 2.5, ' stroke-dasharray="5,3"'
    fill = COMPUTED_FILL if ("computed" in n.marks and n.kind == "input") else \
        _fill(n, colours)
    tip = n.note or f"{n.title} {n.detail}"
    if n.buffer is not None:
        tip += f" (buffer {colours[n.buffer]})"
    parts = [f'<g class="node {n.kind}" id="lazynp-node-{i}"><title>{escape(tip)}</title>']
    if "output" in n.marks:
        parts.append(f'<rect x="{_f(x0 - 3)}" y="{_f(y0 - 3)}" width="{_f(b.w + 6)}" '
                     f'height="{_f(b.h + 6)}" rx="{_f(rx + 3)}" fill="none" '
                     f'stroke="{stroke}" stroke-width="1"/>')
    parts.append(f'<rect class="box" x="{_f(x0)}" y="{_f(y0)}" width="{_f(b.w)}" '
                 f'height="{_f(b.h)}" '
                 f'rx="{_f(rx)}" fill="{fill}" stroke="{stroke}" stroke-width="{sw}"{dash}/>')
    parts.append(f'<text x="{_f(b.x)}" y="{_f(b.y - 3)}" text-anchor="middle" '
                 f'font-weight="bold">{escape(n.title)}</text>')
    parts.append(f'<text x="{_f(b.x)}" y="{_f(b.y + 12)}" text-anchor="middle" '
                 f'font-size="10" fill="#333333">{escape(n.detail)}</text>')
    parts.append("</g>")
    return "".join(parts)


def to_svg(drawing, engine: str = "auto") -> str:
    """SVG text of the drawing: ``engine="dot"`` (Graphviz; the layout below when it is not
    installed), ``"python"`` (the pure-Python layout) or ``"auto"`` (dot when present)."""
    if engine not in ("auto", "dot", "python"):
        raise ValueError(f"lazynp drawing: engine must be 'auto', 'dot' or 'python', "
                         f"not {engine!r}")
    if engine != "python":
        svg = dot_svg(drawing)
        if svg is not None:
            return svg
    return layout_svg(drawing)

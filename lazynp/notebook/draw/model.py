"""What a graph picture shows: :class:`Drawing`, built from a Symbol's entries."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir.passes import memory_plan, pipeline
from ...ir.symbol import Ref

#: marks a node can carry (drawn as described in :mod:`.render`'s legend)
MARKS = ("output", "forced", "fallback", "computed")


@dataclass
class DrawnNode:
    """One box: ``title`` (op or input name) over ``detail`` (shape and dtype)."""

    title: str
    detail: str
    kind: str = "op"                     # input | const | op | view | write
    marks: frozenset = frozenset()
    buffer: int | None = None            # storage id in the memory plan (shared colour)
    note: str = ""                       # tooltip text


@dataclass
class Drawing:
    """Nodes in topological order, edges ``(producer, consumer)``, fusion groups (lists of
    node indices, two members or more) and the number of planned buffers."""

    nodes: list
    edges: list
    groups: list = field(default_factory=list)
    num_buffers: int = 0
    title: str = ""
    edge_notes: dict = field(default_factory=dict)    # (producer, consumer) -> tooltip

    def legend(self) -> list:
        """``(swatch kind, text)`` for what this drawing uses."""
        out = []
        if self.groups:
            out.append(("group", "fused kernel"))
        used = set().union(*(n.marks for n in self.nodes)) if self.nodes else set()
        texts = {"forced": "forced (computed by a flush)", "fallback": "NumPy fallback",
                 "computed": "computed value", "output": "output"}
        out.extend((m, texts[m]) for m in MARKS if m in used)
        if self.num_buffers:
            out.append(("buffer", f"colour = planned buffer ({self.num_buffers})"))
        if any(n.buffer is None and n.kind in ("op", "view") for n in self.nodes):
            out.append(("unbuffered", "no planned buffer (a new output, or inside a "
                                      "fused kernel)"))
        return out


def shape_text(shape) -> str:
    if len(shape) == 0:
        return "scalar"
    return "\u00d7".join("?" if s is None else str(s) for s in shape)


def drawing_of_symbol(sym, groups=None, storage_of=None, marks=None, notes=None,
                      title: str = "") -> Drawing:
    """A :class:`Drawing` of ``sym``'s entries.

    Parameters
    ----------
    sym : lazynp.Symbol
    groups : list of lists of int, optional
        Fusion groups as entry indices; default: the fusion pass on ``sym``.
    storage_of : dict, optional
        Entry index -> buffer id; default: the memory plan of ``sym``
        (:func:`lazynp.ir.passes.memory_plan.plan_symbol`).  Views take their base's buffer.
    marks, notes : dict, optional
        Entry index -> extra marks (set of str) / tooltip text.
    """
    if groups is None:
        groups = pipeline.fusion(sym)
    if storage_of is None:
        storage_of = memory_plan.plan_symbol(sym).storage_of
    marks = marks or {}
    notes = notes or {}
    outs = {int(o) for o in sym.output_refs}
    buffer_of: dict = {}
    nodes, edges = [], []
    for i, n in enumerate(sym.nodes):
        m = set(marks.get(i, ()))
        if i in outs:
            m.add("output")
        if n.op == "placeholder":
            head = str(n.params.get("name", "input"))
            detail = f"{shape_text(n.params.get('dims', n.shape))} {n.dtype}"
            kind = "input"
        elif n.op == "leaf":
            head, kind = "const", "const"
            detail = f"{shape_text(n.shape)} {n.dtype}"
        else:
            head = n.op
            detail = f"{shape_text(n.shape)} {n.dtype}"
            kind = "view" if n.op == "view" else "op"
        buf = storage_of.get(i)
        if buf is None and n.op == "view":
            buf = buffer_of.get(int(n.args[0]))
        if buf is not None:
            buffer_of[i] = buf
        nodes.append(DrawnNode(head, detail, kind, frozenset(m), buf, notes.get(i, "")))
        for a in n.args:
            if type(a) is Ref:
                edges.append((int(a), i))
    groups = [sorted(g) for g in groups if len(g) > 1]
    nbuf = len(set(buffer_of.values()))
    return Drawing(nodes, edges, groups, nbuf, title)

"""``lazynp.explain``: what lazynp would do with the pending work behind some arrays.

``explain(*arrays)`` never computes anything: it copies the pending graph behind the arrays
into a :class:`lazynp.Symbol` (computed values become its inputs) and runs the same pure
passes a flush or ``jit`` would: the fusion pass and MXNet's memory planner.  The report
prints as text and shows in Jupyter as the graph picture (:mod:`lazynp.notebook.draw`) and a table.
"""
from __future__ import annotations

import html
import os

import numpy as _np

from . import draw as _draw
from . import fusion_notes as _notes
from ..core import policy as _policy
from .._base import site as _site
from ..array.ndarray import ndarray
from ..core import graph as _graph
from ..core.fusion import FusedGroup, fuse
from ..ir.passes import memory_plan, pipeline
from ..ir.symbol import Ref, SNode, Symbol
from ..ops.registry import OPS
from .jupyter import nbytes_text, prod, html_table, text_table
from .._numpy.fallback import FALLBACK_NODES, tag_fallback

__all__ = ["explain", "Explanation", "tag_fallback"]

#: Jupyter shows the graph picture of reports up to this many nodes (tables always)
MAX_DRAWN_NODES = 300

# --- explain(*arrays) --------------------------------------------------------------------

class _Snapshot:
    """The pending graph behind some arrays, copied into Symbol entries (nothing runs)."""

    def __init__(self, arrays):
        self.entries: list = []
        self.info: list = []         # per entry: dict(state, marks, title, site, node)
        self.outputs: list = []
        index: dict = {}
        seen: set = set()
        for k, a in enumerate(arrays):
            if isinstance(a, ndarray):
                v = a._v
                if v is None:
                    idx = self._input(a._val.shape, a._val.dtype, "array", {"computed"},
                                      "computed", None)
                else:
                    idx = self._walk(v.head, index, seen)
                    g = a._geom
                    if g is not None:
                        idx = self._add(SNode("view", (Ref(idx),), {
                            "offset": g[0], "shape": g[1], "strides": g[2], "dtype": g[3]},
                            g[1], g[3]), "pending" if self.info[idx]["state"] == "pending"
                            else "computed", set(), None, None)
            elif isinstance(a, (_np.ndarray, _np.generic, int, float, complex, bool)):
                arr = _np.asarray(a)
                idx = self._input(arr.shape, arr.dtype, "NumPy value", {"computed"},
                                  "computed", None)
            else:
                raise TypeError(f"lazynp.explain: argument {k} is a {type(a).__name__}, "
                                f"not an array")
            self.outputs.append(idx)

    def _add(self, snode, state, marks, site, node, title=None) -> int:
        self.entries.append(snode)
        self.info.append({"state": state, "marks": set(marks), "site": site, "node": node,
                          "title": title})
        return len(self.entries) - 1

    def _input(self, shape, dtype, title, marks, state, node) -> int:
        name = f"%in{sum(1 for e in self.entries if e.op == 'placeholder')}"
        return self._add(SNode("placeholder", (), {"name": name}, shape, dtype), state, marks,
                         None, node, title)

    def _walk(self, head, index: dict, seen: set) -> int:
        G = _graph

        def expand(n) -> bool:
            return n.op is G.VIEW or (n.state != G.DONE and n.op is not G.PLACEHOLDER)

        for n, walked in G.post_order([head], expand, seen):
            if n.op is G.PLACEHOLDER:
                index[id(n)] = self._add(SNode("placeholder", (), {"name": n.params["name"]},
                                               n.shape, n.dtype), "traced input", (), None, n)
            elif walked:
                args = tuple(Ref(index[id(a)]) if type(a) is G.Node else a for a in n.args)
                params = dict(n.params) if n.params else None
                state = "pending"
                if n.op is G.VIEW:
                    base = self.info[index[id(n.args[0])]]["state"]
                    state = "pending" if base == "pending" else "computed"
                index[id(n)] = self._add(SNode(n.op.name, args, params, n.shape, n.dtype),
                                         state, (), n.site, n)
            else:
                name = FALLBACK_NODES.get(n)
                if name is not None:
                    title, marks, state = f"numpy.{name}", {"fallback"}, "NumPy fallback"
                elif n.op is G.LEAF:
                    title, marks, state = "array", {"computed"}, "computed"
                else:
                    title, marks, state = n.op.name, {"forced"}, "forced"
                if n.error is not None:
                    state = f"failed: {type(n.error).__name__}"
                index[id(n)] = self._input(n.shape, n.dtype, title, marks, state, n)
        return index[id(head)]


def _policy_decision(snode, entries, info) -> str:
    """What the execution policy does with this op when its inputs are computed."""
    op = OPS.get(snode.op)
    kind = op.kind if op is not None else "opaque"
    size = prod(snode.shape)
    shared = False
    for a in snode.args:
        if type(a) is Ref:
            size = max(size, prod(entries[int(a)].shape))
            node = info[int(a)]["node"]
            if node is not None and node.state == _graph.DONE and node.exported is True:
                shared = True
    if _policy.get_policy() == "lazy":
        return "record (policy 'lazy')"
    if shared:
        return "at once (reads a buffer NumPy shares)"
    if kind not in _policy.SIZED_KINDS:
        first = snode.args[0] if snode.args else None
        if op is not None and type(first) is Ref and _policy.closes_pending_work(op, size):
            m = info[int(first)]["node"]
            if m is not None and m.state == _graph.PENDING and m.op.kind == "elementwise":
                return "record (the last step of its matrix's fused kernel)"
        return f"at once ({kind}: fusion cannot improve it)"
    if _policy.sized_ok(kind, size):
        return f"at once ({size:,} < {_policy.EAGER_MAX_ELEMS:,} elements)"
    return f"record ({size:,} \u2265 {_policy.EAGER_MAX_ELEMS:,} elements)"


def _short_site(site) -> str:
    if site is None:
        return ""
    text = _site.format_site(site)
    try:
        code, lasti = site
        return f"{os.path.basename(code.co_filename)}:{_site.line_of(code, lasti)}"
    except (TypeError, ValueError, AttributeError):
        return text


class Explanation:
    """What lazynp would do with the pending graph behind some arrays (see :func:`explain`).

    Attributes
    ----------
    symbol : lazynp.Symbol
        The pending graph copied as a Symbol; computed values are its inputs.
    rows : list of dict
        One per entry: ``index``, ``op``, ``shape``, ``dtype``, ``state`` (pending,
        computed, forced, NumPy fallback...), ``policy``, ``kernel`` (fusion group number or
        ""), ``buffer`` (planned buffer or ""), ``site`` (recording line).
    kernels : list of list of int
        Entries each fused kernel would hold (a reduction epilogue last).
    boundaries : list of dict
        Each pair of adjacent pending ops that would not share a kernel: ``producer`` and
        ``consumer`` (entry indices; a view between them is looked through), ``reason``
        (why, as the fusion pass decided it: different shapes, an op without a kernel, a
        reduction ending its kernel, a value read through a view...) and ``edge`` (the
        picture's edge that carries the note).
    memory : lazynp.ir.passes.memory_plan.MemoryPlan
        MXNet's memory plan of the graph (one buffer per op before fusion).
    """

    def __init__(self, arrays):
        if len(arrays) == 1 and isinstance(arrays[0], Symbol):
            self.symbol = arrays[0]
            self.is_symbol = True
            self._info = [{"state": {"placeholder": "input", "leaf": "constant"}.get(
                e.op, "symbolic"), "marks": set(), "site": None, "node": None, "title": None}
                for e in self.symbol.nodes]
            self.num_pending = sum(1 for e in self.symbol.nodes
                                   if e.op not in ("placeholder", "leaf", "view"))
        else:
            snap = _Snapshot(arrays)
            self.symbol = Symbol(snap.entries, snap.outputs)
            self.is_symbol = False
            self._info = snap.info
            self.num_pending = sum(1 for i in snap.info if i["state"] == "pending" and
                                   i["node"] is not None and i["node"].op is not _graph.VIEW)
        entries = self.symbol.nodes
        self.boundaries: list = []
        self.kernels, self.flush_note = self._fusion() if self.num_pending else ([], "")
        self.memory = memory_plan.plan_symbol(self.symbol)
        group_of = {i: k + 1 for k, g in enumerate(self.kernels) for i in g}
        colours = {}
        for i in range(len(entries)):
            s = self.memory.storage_of.get(i)
            if s is not None and s not in colours:
                colours[s] = len(colours)
        self.rows = []
        for i, (e, inf) in enumerate(zip(entries, self._info)):
            is_op = e.op != "placeholder"
            title = inf["title"] or e.op
            if e.op == "placeholder" and inf["title"] is None:
                title = e.params["name"]
            self.rows.append({
                "index": i, "op": title, "shape": e.shape, "dtype": str(e.dtype),
                "state": inf["state"],
                "policy": _policy_decision(e, entries, self._info) if is_op and e.op != "view" and
                not self.is_symbol else "",
                "kernel": group_of.get(i, ""),
                "buffer": colours.get(self.memory.storage_of.get(i), ""),
                "site": _short_site(inf["site"]),
            })

    def _fusion(self):
        """Fused kernels a flush of this graph would run, and a note on its size; fills
        :attr:`boundaries` (why each pair of adjacent ops is not in one kernel)."""
        if self.is_symbol:
            kernels, self.boundaries = _notes.symbol_notes(self.symbol)
            return kernels, f"{len(kernels)} fused kernel(s) of two ops or more, as " \
                            f"lazynp.jit groups them (reductions run on their own)"
        nodes = pipeline.to_nodes(self.symbol)
        pos = {id(g): i for i, g in enumerate(nodes)}
        work = [(g, False) for g, inf in zip(nodes, self._info)
                if inf["state"] in ("pending", "symbolic") and g.op is not _graph.VIEW]
        max_elems = max((prod(g.shape) for g, _ in work), default=0)
        threshold = 4 * _graph.shared.min_fused_work
        why = {}
        items = fuse(work, type(nodes[0]), why=why, matvec=True)
        kernels, small = [], 0
        for it in items:
            if type(it) is FusedGroup:
                members = [pos[id(m)] for m in it.nodes()]
                if prod(it.shape) * len(members) < _graph.shared.min_kernel_work:
                    small += 1
                    text = (f"their kernel would loop over only {prod(it.shape):,} "
                            f"element(s) x {len(members)} op(s) (< "
                            f"{_graph.shared.min_kernel_work:,}): a kernel call costs more, "
                            f"they run op by op on NumPy")
                    for m in it.nodes():
                        for a in m.args:
                            if id(a) in it.member_ids:
                                why[(id(a), id(m))] = text
                    if it.reduction is not None:
                        why[(id(it.reduction.args[0]), id(it.reduction))] = text
                    continue
                kernels.append(members)
        if max_elems < threshold:
            text = (f"a small flush (largest op {max_elems:,} < {threshold:,} elements) runs "
                    f"without the fusion pass")
            self.boundaries = self._boundaries(nodes, work, [], {}, default=text)
            return [], (f"small flush (largest op {max_elems:,} < {threshold:,} elements): it "
                        f"runs op by op on NumPy or as cached small tree kernels, without the "
                        f"fusion pass")
        self.boundaries = self._boundaries(nodes, work, kernels, why)
        note = f"{len(kernels)} fused kernel(s)"
        if small:
            note += f"; {small} group(s) too small for a kernel call run op by op on NumPy"
        return kernels, note

    def _boundaries(self, nodes, work, kernels, why, default: str | None = None) -> list:
        return _notes.boundaries(
            nodes, work, kernels, why, default=default,
            states=[inf["state"] for inf in self._info],
            names=[inf["title"] or e.op for inf, e in zip(self._info, self.symbol.nodes)])

    # --- output ---------------------------------------------------------------------------
    def drawing(self):
        """The graph as a :class:`lazynp.notebook.draw.Drawing` (kernels boxed, buffers coloured,
        forced values and fallbacks marked)."""
        marks = {i: inf["marks"] for i, inf in enumerate(self._info)}
        titles = {i: inf["title"] for i, inf in enumerate(self._info) if inf["title"]}
        notes = {i: f"{r['op']} {r['shape']} {r['dtype']}: {r['state']}"
                 + (f", policy: {r['policy']}" if r["policy"] else "")
                 + (f", recorded at {r['site']}" if r["site"] else "")
                 for i, r in enumerate(self.rows)}
        d = _draw.drawing_of_symbol(self.symbol, groups=self.kernels,
                                    storage_of=self.memory.storage_of, marks=marks,
                                    notes=notes, title="lazynp.explain")
        d.edge_notes = {b["edge"]: f"not fused because {b['reason']}"
                        for b in self.boundaries}
        for i, t in titles.items():
            d.nodes[i].title = t
        return d

    def svg(self, engine: str = "auto") -> str:
        """The graph picture as SVG text (see :func:`lazynp.notebook.draw.to_svg`)."""
        return _draw.to_svg(self.drawing(), engine)

    def to_dot(self) -> str:
        """Graphviz DOT source of the graph picture."""
        return _draw.to_dot(self.drawing(), "lazynp_explain")

    _HEADERS = ("#", "op", "shape", "dtype", "state", "policy", "kernel", "buffer",
                "recorded at")

    def _table_rows(self):
        return [(r["index"], r["op"], r["shape"], r["dtype"], r["state"], r["policy"],
                 r["kernel"], r["buffer"], r["site"]) for r in self.rows]

    def summary(self) -> list:
        """The report's headline lines."""
        ops = sum(1 for e in self.symbol.nodes if e.op not in ("placeholder", "view"))
        at_once = sum(1 for r in self.rows if r["state"] == "pending" and
                      r["policy"].startswith("at once"))
        if self.is_symbol:
            return [f"lazynp.explain: Symbol with {self.num_pending} op(s), inputs "
                    f"{self.symbol.inputs}, {len(self.symbol.output_refs)} output(s)",
                    f"fusion: {self.flush_note}"] + self._kernel_lines() + [
                    self._memory_line(ops)]
        lines = [f"lazynp.explain: {self.num_pending} pending op(s) behind "
                 f"{len(self.symbol.output_refs)} array(s); policy "
                 f"{_policy.get_policy()!r}, EAGER_MAX_ELEMS={_policy.EAGER_MAX_ELEMS:,}"]
        if not self.num_pending:
            lines.append("nothing is pending: every array is computed")
            return lines
        lines.append(f"execution policy: {at_once} of the pending op(s) are small enough "
                     f"to run at once on computed inputs")
        lines.append(f"fusion: {self.flush_note}")
        return lines + self._kernel_lines() + [self._memory_line(ops)]

    def _kernel_lines(self) -> list:
        e = self.symbol.nodes
        return [f"  kernel {k + 1}: " + ", ".join(e[i].op for i in g) +
                f"  ({'x'.join(map(str, e[g[0]].shape)) or 'scalar'})"
                for k, g in enumerate(self.kernels)] + self._boundary_lines()

    def _boundary_lines(self) -> list:
        return [f"  not fused: #{b['producer']} {self.rows[b['producer']]['op']} -> "
                f"#{b['consumer']} {self.rows[b['consumer']]['op']} because {b['reason']}"
                for b in self.boundaries]

    def _memory_line(self, ops: int) -> str:
        m = self.memory
        return (f"memory plan ({ops} op(s), one buffer each before fusion): "
                f"{nbytes_text(m.planned_bytes)} in {m.num_buffers} buffer(s) vs "
                f"{nbytes_text(m.naive_bytes)} naive, {len(m.inplace)} in-place")

    def text(self) -> str:
        return "\n".join(self.summary() + ["", text_table(self._HEADERS, self._table_rows())])

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        head = "".join(f"<div>{html.escape(s)}</div>" for s in self.summary())
        n = len(self.symbol.nodes)
        if n > MAX_DRAWN_NODES:
            pic = (f"<div><i>{n} nodes: too many to draw here (the picture of "
                   f"<code>.svg()</code> draws them all)</i></div>")
        else:
            pic = self.svg() if n else ""
        return (f'<div class="lazynp-explain">{head}<div>{pic}</div>'
                f"{html_table(self._HEADERS, self._table_rows(), 'nodes')}</div>")


def explain(*arrays) -> Explanation:
    """What lazynp would do with the pending work behind ``arrays``, without running it.

    Parameters
    ----------
    *arrays : lazynp.ndarray or one lazynp.Symbol
        Arrays whose pending graph to explain (NumPy values count as computed inputs), or
        a Symbol (its fusion groups and memory plan).

    Returns
    -------
    Explanation
        Prints as a text report (the pending ops, what the execution policy does with each,
        which would fuse into one kernel, the memory plan); in Jupyter it shows the graph
        picture and the tables (``_repr_html_``).
    """
    return Explanation(arrays)

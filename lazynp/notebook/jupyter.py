"""Reports people look at, readable in a terminal (``print``) and drawn in Jupyter
(``_repr_html_``): the ``lazynp.stats()`` table, ``jit(f).explain()`` with each plan's
picture, and the table helpers :mod:`lazynp.notebook.explain` uses too.
"""
from __future__ import annotations

import html

from ..ir.passes import pipeline
from ..jit import set_explanation_type
from . import draw as _draw
from . import fusion_notes as _notes

__all__ = ["Stats", "JitExplanation", "plan_drawing", "plan_boundaries", "text_table",
           "html_table", "nbytes_text", "prod"]


# --- tables ------------------------------------------------------------------------------

def text_table(headers, rows) -> str:
    """A plain-text table with aligned columns."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


_TABLE_STYLE = ('style="border-collapse:collapse;font-family:monospace;font-size:12px;'
                'margin:4px 0"')


def html_table(headers, rows, caption: str = "") -> str:
    """An HTML ``<table>`` (well-formed XHTML: every cell escaped)."""
    cap = f"<caption style=\"text-align:left;font-weight:bold\">{html.escape(caption)}" \
          f"</caption>" if caption else ""
    head = "".join(f'<th style="text-align:left;padding:2px 8px;border-bottom:1px solid #999">'
                   f"{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td style="padding:2px 8px">{html.escape(str(c))}</td>'
                                    for c in r) + "</tr>" for r in rows)
    return f"<table class=\"lazynp-table\" {_TABLE_STYLE}>{cap}<thead><tr>{head}</tr></thead>" \
           f"<tbody>{body}</tbody></table>"


def nbytes_text(n: int) -> str:
    """``n`` bytes for people: ``"512 B"``, ``"7.6 MiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def prod(shape) -> int:
    """Number of elements of ``shape``."""
    p = 1
    for s in shape:
        p *= int(s)
    return p


# --- stats() -----------------------------------------------------------------------------

_STAT_DOCS = {
    "ops_recorded": "ops recorded into the graph",
    "ops_eager": "ops run at once on NumPy (policy)",
    "flushes": "flushes (graph runs)",
    "nodes_executed": "nodes executed by flushes",
    "bound_flushes": "flushes because the pending graph grew past its bound",
    "inplace_writes": "writes done in place",
    "copy_on_write": "writes done on a copy",
    "elided": "temporaries reused for a result (NumPy's elision)",
    "kernel_compiles": "fused kernels compiled (Numba)",
    "kernel_cache_hits": "fused kernels loaded from the disk cache",
    "kernel_compile_seconds": "time spent compiling kernels",
    "kernel_compile_failures": "kernels that failed to compile (ran on NumPy)",
    "fused_groups_run": "fused kernels run",
    "fused_groups_numpy": "fused groups run on NumPy (no kernel yet)",
    "fused_groups_fp_rerun": "kernels rerun on NumPy for a floating-point warning",
    "pool_hits": "buffers reused from the pool",
    "pool_misses": "buffers allocated",
    "tree_kernels_run": "small-flush tree kernels run",
    "tree_kernels_rejected": "tree kernels that declined (rerun on NumPy)",
    "tree_ops_on_numpy": "ops of tree kernels run one by one on NumPy (kernel not ready)",
}


class Stats(dict):
    """``lazynp.stats()``: a plain dict of counters that prints as a table (``str``) and
    shows as one in Jupyter (``_repr_html_``); ``repr`` stays the dict's."""

    def _rows(self):
        rows = []
        for k, v in self.items():
            if isinstance(v, dict):
                continue
            if isinstance(v, float):
                v = f"{v:.4g}"
            elif isinstance(v, int):
                v = f"{v:,}"
            rows.append((k, v, _STAT_DOCS.get(k, "")))
        return rows

    def _fallback_rows(self):
        sites = self.get("fallback_sites", {})
        rows = []
        for name, n in sorted(self.get("fallbacks", {}).items(), key=lambda kv: -kv[1]):
            where = sites.get(name, {})
            first = max(where, key=where.get) if where else ""
            rows.append((f"numpy.{name}", n, first + (f" (+{len(where) - 1} more sites)"
                                                      if len(where) > 1 else "")))
        return rows

    def table(self) -> str:
        """The counters as a text table (fallbacks with their most frequent call site)."""
        out = text_table(("counter", "value", "meaning"), self._rows())
        fb = self._fallback_rows()
        out += "\n\n" + (text_table(("NumPy fallback", "calls", "most frequent call site"), fb)
                         if fb else "NumPy fallbacks: none")
        return out

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        fb = self._fallback_rows()
        return ('<div class="lazynp-stats">' +
                html_table(("counter", "value", "meaning"), self._rows(), "lazynp.stats()") +
                (html_table(("NumPy fallback", "calls", "most frequent call site"), fb,
                            "NumPy fallbacks") if fb else "<div>NumPy fallbacks: none</div>")
                + "</div>")


# --- jit(f).explain() --------------------------------------------------------------------

def plan_drawing(plan, title: str = ""):
    """A compiled jit plan's graph: its fused kernels boxed, its planned buffers coloured,
    each edge between two ops that do not fuse carrying the reason (tooltip)."""
    inner = getattr(plan, "inner", None)       # TiledPlan: the per-slice plan
    p = inner if inner is not None else plan
    sym = p.symbol
    groups = [g for g in pipeline.fusion(sym) if len(g) > 1]
    d = _draw.drawing_of_symbol(sym, groups=groups, storage_of=p.mplan.storage_of,
                                title=title)
    d.edge_notes = {b["edge"]: f"not fused because {b['reason']}"
                    for b in plan_boundaries(plan)}
    return d


def plan_boundaries(plan) -> list:
    """Why each pair of adjacent ops of a jit plan is not in one kernel (the
    ``boundaries`` of :func:`lazynp.explain` on the plan's Symbol)."""
    inner = getattr(plan, "inner", None)
    return _notes.symbol_notes((inner if inner is not None else plan).symbol)[1]


class JitExplanation(str):
    """``jit(f).explain()``: the text (a ``str``), with a table and each plan's picture in
    Jupyter."""

    def __new__(cls, text: str, log=(), plans=None, name: str = "?"):
        self = super().__new__(cls, text)
        self._log = list(log)
        self._plans = plans or {}
        self._name = name
        return self

    def __repr__(self) -> str:
        return str.__str__(self)

    def _repr_html_(self) -> str:
        if not self._log:
            return f"<div>{html.escape(str(self))}</div>"
        rows, pics = [], []
        for k, (key, reason) in enumerate(self._log):
            plan = self._plans.get(key)
            if plan is None:
                continue
            r = plan.memory_report()
            rows.append((k + 1, reason, f"{r['ops']} \u2192 {r['steps']}", r["fused_kernels"],
                         nbytes_text(r["naive_bytes"]), nbytes_text(r["planned_bytes"]),
                         r["num_buffers"], r.get("batch_tiles", "")))
            drawing = plan_drawing(plan, f"plan {k + 1}")
            svg = _draw.to_svg(drawing)
            sym = plan.symbol if getattr(plan, "inner", None) is None else plan.inner.symbol
            notes = "".join(
                f"<li>#{a} {html.escape(sym.nodes[a].op)} \u2192 #{b} "
                f"{html.escape(sym.nodes[b].op)}: {html.escape(note)}</li>"
                for (a, b), note in sorted(drawing.edge_notes.items()))
            opened = ' open="open"' if k == len(self._log) - 1 else ""
            pics.append(f"<details{opened}><summary>plan "
                        f"{k + 1} graph</summary>{svg}"
                        + (f"<ul class=\"lazynp-unfused\">{notes}</ul>" if notes else "")
                        + "</details>")
        table = html_table(("plan", "why it was made", "ops \u2192 steps", "kernels",
                            "naive memory", "planned memory", "buffers", "batch slices"),
                           rows, f"lazynp.jit({self._name})")
        return f'<div class="lazynp-jit-explain">{table}{"".join(pics)}</div>'


set_explanation_type(JitExplanation)

"""The pictures of a :class:`lazynp.Symbol` (``drawing``, ``to_dot``, ``svg``, and Jupyter's
``_repr_svg_``/``_repr_html_``), installed on the Symbol when :mod:`lazynp.notebook` is
imported."""
from __future__ import annotations

import html

from ..ir.symbol import add_member
from . import draw as _draw


def _drawing(self, title: str = "") -> _draw.Drawing:
    """The graph as a :class:`lazynp.notebook.draw.Drawing`: ops labelled with shape and dtype,
    fusion groups boxed, entries coloured by the buffer the memory plan gives them."""
    return _draw.drawing_of_symbol(self, title=title)


def _to_dot(self, name: str = "lazynp") -> str:
    """Graphviz DOT source of the graph (see :meth:`drawing`)."""
    return _draw.to_dot(self.drawing(), name)


def _svg(self, engine: str = "auto") -> str:
    """SVG picture of the graph: Graphviz's ``dot`` when it is installed (``engine=
    "auto"``), else (or with ``engine="python"``) lazynp's own layered layout."""
    return _draw.to_svg(self.drawing(), engine)


def _repr_svg(self) -> str:
    return self.svg()


def _repr_html(self) -> str:
    return (f"<div><div>{html.escape(repr(self))}</div>{self.svg()}<details><summary>"
            f"listing</summary><pre>{html.escape(self.text())}</pre></details></div>")


add_member("drawing", _drawing)
add_member("to_dot", _to_dot)
add_member("svg", _svg)
add_member("_repr_svg_", _repr_svg)
add_member("_repr_html_", _repr_html)

"""Graph pictures for Jupyter and the terminal.

:mod:`.model` turns a Symbol (or a snapshot of the pending graph) into a :class:`Drawing`
(labelled nodes, edges, fusion groups, buffers of the memory plan, marks for forced nodes
and NumPy fallbacks); :mod:`.render` writes it as Graphviz DOT or SVG (Graphviz's ``dot``
when it is installed, otherwise the pure-Python layered layout of :mod:`.layout`).
"""
from __future__ import annotations

from .model import DrawnNode, Drawing, drawing_of_symbol
from .render import to_dot, to_svg

__all__ = ["DrawnNode", "Drawing", "drawing_of_symbol", "to_dot", "to_svg"]

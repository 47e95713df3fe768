"""The pending graph, as the layers above use it: one import for its parts.

The graph's jobs live in their own modules, each importing only the ones below it:

* :mod:`.state`: what the parts share (statistics, the record counters, pending Vars,
  ``shared``: keep_graph and the autograd tape, the locks and the fork hooks);
* :mod:`.nodes`: the types (``Node``, ``Var``), their states, the leaf/view/placeholder
  ops, reading a node's value;
* :mod:`.node_errors`: what a node's run reports (warnings at its recording line, its error);
* :mod:`.trees`: tree-kernel bookkeeping (structures at recording, tree flushes);
* :mod:`.executor`: ``flush``: collect, plan, schedule, run and wait;
* :mod:`.recorder`: ``record``, writes, leaves and views, the tape hooks.

Each part binds the C extension's versions of its own names (``Node``, ``record``...) when
the extension is in use, so the names below are the ones every part uses.  Code that
replaces one of them (a test) does it in the module that owns and calls it: a name
re-exported here does not carry the replacement.
"""
from __future__ import annotations

from .executor import (evaluate_nodes, flush, flush_live, materialize, pending_order,
                       value_for_eager)
from .node_errors import add_site_note
from .nodes import (DONE, LEAF, PENDING, PLACEHOLDER, SCHEDULED, VIEW, Node, TracingError,
                    Var, buffer_view, computed, live_pending_heads, own_result, placeholder,
                    post_order)
from .recorder import (install_tape, keeping_graph, leaf, pause_tape, py_record, record,
                       record_write, remove_tape, run_now, view_node, writable_view)
from .state import (STATS, book_lock, counts, fork_done_executor, fork_done_recorder,
                    fork_prepare_executor, fork_prepare_recorder, shared)

__all__ = [
    # state
    "STATS", "book_lock", "counts", "shared", "fork_prepare_recorder", "fork_done_recorder",
    "fork_prepare_executor", "fork_done_executor",
    # nodes
    "PENDING", "SCHEDULED", "DONE", "LEAF", "VIEW", "PLACEHOLDER", "Node", "Var",
    "TracingError", "placeholder", "buffer_view", "computed", "own_result",
    "live_pending_heads", "post_order",
    # node errors
    "add_site_note",
    # executor
    "flush", "flush_live", "materialize", "evaluate_nodes", "value_for_eager",
    "pending_order",
    # recorder
    "record", "py_record", "record_write", "writable_view", "run_now", "leaf",
    "view_node", "keeping_graph", "install_tape", "pause_tape", "remove_tape",
]

"""What a node's run reports: the warnings NumPy logged while it ran, issued at the line
that recorded it (through the warnings filters of that call), and its error, stored on the
node with a note naming that line."""
from __future__ import annotations

from .._base import site as _site
from . import late_warnings as _late_warnings
from .nodes import DONE, Node


def issue_caught(n: Node) -> None:
    """Issue the warnings NumPy logged in this thread while ``n`` ran, at ``n``'s recording
    line through the warnings filters of its call.  A filter that turns them into errors
    makes ``n`` fail, as the call would have in NumPy."""
    msgs = _late_warnings.take()
    if msgs:
        try:
            _late_warnings.issue(msgs, n.site, n.warnings_state)
        except BaseException as exc:
            node_failed(n, exc)
            n.value = None
            raise


def fail(items, exc) -> None:
    for n, _ in items:
        if n.state != DONE:
            n.error = exc
            n.state = DONE


def node_failed(n: Node, exc: BaseException) -> None:
    add_site_note(exc, n)
    n.error = exc
    n.state = DONE


_SITE_NOTE = "lazynp: operation recorded at "


def add_site_note(exc: BaseException, node: Node) -> None:
    """Name the line that recorded the failing operation (once: an error read again by a
    later node keeps the note of the node where it arose)."""
    if node.site is not None and hasattr(exc, "add_note") and \
            not any(n.startswith(_SITE_NOTE) for n in getattr(exc, "__notes__", ())):
        exc.add_note(_SITE_NOTE + _site.format_site(node.site))

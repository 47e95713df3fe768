"""Settings read from the environment once, adjustable at run time."""
from __future__ import annotations

import os

#: ``LAZYNP_STRICT=1`` turns every NumPy fallback into a :class:`lazynp.FallbackError`.
STRICT = os.environ.get("LAZYNP_STRICT", "0") not in ("", "0", "false", "False")

#: The pending graph is flushed when this many nodes were recorded since the last flush.
MAX_PENDING_NODES = int(os.environ.get("LAZYNP_MAX_PENDING", "2000"))

#: ... or when the bytes of pending outputs exceed this.
MAX_PENDING_BYTES = int(os.environ.get("LAZYNP_MAX_PENDING_BYTES", str(2 << 30)))

#: A flush whose outputs total fewer bytes than this runs as one engine push (MXNet's bulk
#: execution): per-op scheduling would cost more than the work.
BULK_BYTES = int(os.environ.get("LAZYNP_BULK_BYTES", str(1 << 20)))

#: Fuse elementwise groups into Numba kernels (``LAZYNP_FUSION=0`` runs NumPy per op).
FUSION = os.environ.get("LAZYNP_FUSION", "1") not in ("0", "false", "False")

#: ``LAZYNP_PURE_PYTHON=1`` runs the pure Python recorder even when the C one
#: (``lazynp._base._speedups``) is built.
PURE_PYTHON = os.environ.get("LAZYNP_PURE_PYTHON", "0") not in ("", "0", "false", "False")

#: Eager ``grad``/``value_and_grad`` compile a plan for a forward-graph structure seen twice
#: and replay it (``lazynp.autograd.replay``); ``LAZYNP_GRAD_REPLAY=0`` records every backward.
GRAD_REPLAY = os.environ.get("LAZYNP_GRAD_REPLAY", "1") not in ("0", "false", "False")

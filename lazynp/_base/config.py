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


def parse_bytes(text: str, name: str) -> int:
    """``"256M"`` -> 268435456: a byte count with an optional K/M/G suffix (powers of 1024)."""
    t = text.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        n = int(float(t[:-1] if scale > 1 else t) * scale)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a number of bytes such as 268435456 or "
                         f"256M") from None
    if n < 0:
        raise ValueError(f"{name}={text!r}: must be >= 0")
    return n


#: Where compiled kernels are kept between processes (:mod:`lazynp.kernels.cache`).
KERNEL_CACHE_DIR = os.path.abspath(os.path.expanduser(os.environ.get(
    "LAZYNP_CACHE_DIR", os.path.join("~", ".cache", "lazynp", "kernels"))))

#: The kernel cache's size bound (least recently used kernels are evicted); 0: no bound.
KERNEL_CACHE_MAX_BYTES = parse_bytes(os.environ.get("LAZYNP_CACHE_MAX_BYTES", "256M"),
                                     "LAZYNP_CACHE_MAX_BYTES")

#: Numba's threading layer lazynp asks for (:mod:`lazynp.kernels.threading_layer`) unless
#: the user configured Numba's; ``LAZYNP_THREADING_LAYER=default`` leaves Numba's choice.
THREADING_LAYER = os.environ.get("LAZYNP_THREADING_LAYER", "workqueue").strip().lower()

#: Tune glibc's malloc at import (:mod:`lazynp._base.malloc`); ``LAZYNP_MALLOC_TUNING=0``
#: leaves malloc alone.
MALLOC_TUNING = os.environ.get("LAZYNP_MALLOC_TUNING", "1").strip() not in ("0", "false",
                                                                           "False")

"""``lazynp.lib``: NumPy's ``lib`` with lazy ``stride_tricks``."""
import sys
import types

import numpy as _np

from .._numpy.fallback import FallbackModule
from .._numpy import namespace as _ns

stride_tricks = FallbackModule(__name__ + ".stride_tricks", _np.lib.stride_tricks,
                               {"sliding_window_view": _ns.sliding_window_view,
                                "as_strided": _ns.as_strided,
                                "broadcast_to": _ns.broadcast_to,
                                "broadcast_arrays": _ns.broadcast_arrays})
_mod = FallbackModule(__name__, _np.lib, {"stride_tricks": stride_tricks,
                                          "__path__": __path__})
sys.modules[__name__ + ".stride_tricks"] = stride_tricks
sys.modules[__name__] = _mod

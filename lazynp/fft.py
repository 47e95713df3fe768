"""``lazynp.fft``: NumPy's FFTs (counted fallbacks for now)."""
import sys

import numpy as _np

from ._fallback import FallbackModule

sys.modules[__name__] = FallbackModule(__name__, _np.fft)

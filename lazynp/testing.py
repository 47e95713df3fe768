"""``lazynp.testing`` is NumPy's own testing module (it forces lazy arrays via ``__array__``)."""
import sys

import numpy.testing as _testing

sys.modules[__name__] = _testing

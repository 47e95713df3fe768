"""Where ufuncs pickled by lazynp before its layered package (0.1.0) find their loader.

Such pickles name ``lazynp._ufunc._ufunc_named``; ufuncs now live in
:mod:`lazynp._numpy.ufunc`.
"""
from ._numpy.ufunc import _ufunc_named  # noqa: F401

"""Where arrays pickled by lazynp before its layered package (0.1.0) find their loader.

Such pickles name ``lazynp.ndarray._unpickle``; the array type now lives in
:mod:`lazynp.array.ndarray`.  ``lazynp/__init__.py`` imports this module before it binds
the name ``lazynp.ndarray`` to the array class.
"""
from .array.ndarray import _unpickle  # noqa: F401

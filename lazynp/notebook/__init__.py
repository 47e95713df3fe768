"""lazynp.notebook: reports and graph pictures for people, in a terminal and in Jupyter.

Importing it installs the Symbol's picture methods (:mod:`.symbol_pictures`) and the
report ``jit(f).explain()`` returns (:mod:`.jupyter`).
"""
from . import jupyter as _jupyter  # noqa: F401
from . import symbol_pictures as _symbol_pictures  # noqa: F401

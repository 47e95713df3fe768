"""``lazynp.ndarray.flags``: NumPy's flags object, with OWNDATA as NumPy sets it.

The memory-layout flags (contiguity, alignment, WRITEABLE...) are those of the array's
shadow, a NumPy view with the array's geometry (see :mod:`lazynp.array.ndarray`), and
setting one (``a.flags.writeable = False``) sets it there, as in NumPy.  Being a view, the
shadow never owns its data: OWNDATA is the array's own answer instead, True for an array
that is not a view of another (``a.base is None``), as for NumPy's fresh arrays.
"""
from __future__ import annotations

_OWNDATA_BIT = 0x0004           # NPY_ARRAY_OWNDATA
_OWNDATA_KEYS = frozenset(("O", "OWNDATA"))


class ArrayFlags:
    """The flags of a lazynp array (the interface of NumPy's ``flagsobj``)."""

    __slots__ = ("_flags", "_owndata")

    def __init__(self, flags, owndata: bool):
        object.__setattr__(self, "_flags", flags)
        object.__setattr__(self, "_owndata", bool(owndata))

    @property
    def owndata(self) -> bool:
        return self._owndata

    @property
    def num(self) -> int:
        n = self._flags.num & ~_OWNDATA_BIT
        return n | _OWNDATA_BIT if self._owndata else n

    def __getattr__(self, name):
        return getattr(self._flags, name)

    def __setattr__(self, name, value) -> None:
        if name == "owndata":
            raise AttributeError("attribute 'owndata' of 'numpy.flagsobj' objects is not "
                                 "writable")
        setattr(self._flags, name, value)

    def __getitem__(self, key):
        if isinstance(key, str) and key.upper() in _OWNDATA_KEYS:
            return self._owndata
        return self._flags[key]

    def __setitem__(self, key, value) -> None:
        self._flags[key] = value

    def __eq__(self, other):
        if isinstance(other, (ArrayFlags, type(self._flags))):
            return self.num == other.num
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        lines = repr(self._flags).splitlines()
        return "\n".join(f"  OWNDATA : {self._owndata}" if line.strip().startswith("OWNDATA")
                         else line for line in lines) + "\n"


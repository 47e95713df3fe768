"""The NumPy methods a device array class shares with every other one (the CUDA backend's
and the dask backend's): the metadata that follows from ``shape`` and ``dtype``, unary
operators, ``@`` and the reductions, each through its backend's own
``ufunc_call``/``matmul``/``reduce`` (the class's ``_backend``, the
:class:`~lazynp.devices.registry.Backend` it registers)."""
from __future__ import annotations

import numpy as np

__all__ = ["DeviceArrayMethods"]


class DeviceArrayMethods:
    """Mixin of a device array class; its backend sets the class's ``_backend`` to the
    :class:`~lazynp.devices.registry.Backend` it registers, and the class's ``_MADE_WITH``
    says how its arrays are made (they are not made by calling the class: its
    ``_from_node`` wraps a recorded node)."""

    __slots__ = ()
    _backend = None
    _MADE_WITH = ""
    #: marks a device array for :mod:`lazynp.devices`' placement checks
    _lazynp_device_array = True
    #: above NumPy's array and lazynp's: a mixed binary operator is the device array's
    __array_priority__ = 200.0

    def __init__(self, *args, **kwargs):
        raise TypeError(f"lazynp: make {self._MADE_WITH}")

    # --- metadata from the class's own ``shape`` and ``dtype`` --------------------------
    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements (a Python ``int``, as NumPy's)."""
        s = 1
        for d in self.shape:
            s *= d
        return s

    @property
    def itemsize(self) -> int:
        """The bytes of one element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """The bytes of the elements (``size * itemsize``, a view's own, as NumPy's)."""
        return self.size * self.itemsize

    def __neg__(self):
        return self._backend.ufunc_call(np.negative, (self,))

    def __pos__(self):
        return self._backend.ufunc_call(np.positive, (self,))

    def __abs__(self):
        return self._backend.ufunc_call(np.absolute, (self,))

    def __invert__(self):
        return self._backend.ufunc_call(np.invert, (self,))

    def __matmul__(self, other):
        return self._backend.matmul(self, other)

    def __rmatmul__(self, other):
        return self._backend.matmul(other, self)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return self._backend.reduce("sum", self, axis, dtype, out, keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        return self._backend.reduce("prod", self, axis, dtype, out, keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return self._backend.reduce("mean", self, axis, dtype, out, keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        return self._backend.reduce("max", self, axis, None, out, keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return self._backend.reduce("min", self, axis, None, out, keepdims)

    def any(self, axis=None, out=None, keepdims=False):
        return self._backend.reduce("any", self, axis, None, out, keepdims)

    def all(self, axis=None, out=None, keepdims=False):
        return self._backend.reduce("all", self, axis, None, out, keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return self._backend.reduce("std", self, axis, dtype, out, keepdims,
                                    {"ddof": ddof} if ddof else None)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return self._backend.reduce("var", self, axis, dtype, out, keepdims,
                                    {"ddof": ddof} if ddof else None)

    def argmax(self, axis=None, out=None, keepdims=False):
        return self._backend.reduce("argmax", self, axis, None, out, keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        return self._backend.reduce("argmin", self, axis, None, out, keepdims)

"""The registry of device backends.

A backend (:mod:`lazynp.cuda`) registers its entry points here at its import;
:mod:`lazynp.devices` loads it on the first use of a device (:func:`lazynp.devices.activate`)
and calls them.  Nothing below the backend imports it: this registry is how the namespace
reaches it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

__all__ = ["Backend", "register_backend", "registered_backend"]


@dataclasses.dataclass(frozen=True)
class Backend:
    """The entry points of a device backend.

    Attributes
    ----------
    create : callable
        ``create(kind, device, shape, dtype, fill_value)``: ``zeros``/``ones``/``empty``/
        ``full`` on ``device``.
    asarray : callable
        ``asarray(a, device, dtype, copy)``: ``a`` (any array or data) on ``device``.
    ufunc_call : callable
        ``ufunc_call(np_ufunc, args, kwargs)``: a ufunc with an operand on the device.
    reduce : callable
        ``reduce(name, a, axis, dtype, out, keepdims, kw, where)``: ``numpy.<name>`` of a
        device array.
    matmul : callable
        ``matmul(a, b)`` of device arrays.
    where : callable
        ``where(condition, x, y)`` with an operand on the device.
    call_at_once : callable
        ``call_at_once(name, np_fn, args, kwargs)``: NumPy's function run now on the
        device's values.
    evaluate : callable
        ``evaluate(arrays)``: run what the device arrays need and wait for them.
    create_range, random, load, to_zarr, from_zarr, shutdown : callable or None
        Chunked backends only (``"dask"``): ``create_range(name, args, kwargs)``
        (``arange``/``linspace``), ``random(np_method, args, kwargs)`` (a NumPy
        ``Generator`` method), ``load(name, args, kwargs, chunks)`` (``load``/``fromfile``/
        ``memmap`` of a file), ``to_zarr(x, path, **kw)``, ``from_zarr(path, **kw)``,
        ``shutdown()`` (close what the backend started).
    """

    create: Callable[..., Any]
    asarray: Callable[..., Any]
    ufunc_call: Callable[..., Any]
    reduce: Callable[..., Any]
    matmul: Callable[..., Any]
    where: Callable[..., Any]
    call_at_once: Callable[..., Any]
    evaluate: Callable[..., None]
    create_range: Callable[..., Any] | None = None
    random: Callable[..., Any] | None = None
    load: Callable[..., Any] | None = None
    to_zarr: Callable[..., None] | None = None
    from_zarr: Callable[..., Any] | None = None
    shutdown: Callable[[], bool] | None = None


_backends: dict = {}


def register_backend(kind: str, backend: Backend) -> None:
    """Register the backend of the devices of ``kind`` (``"cuda"``, ``"dask"``); called once, by the
    backend at its import."""
    _backends[kind] = backend


def registered_backend(kind: str) -> Backend | None:
    """The backend registered for ``kind``, or None before it has loaded."""
    return _backends.get(kind)

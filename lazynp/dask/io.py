"""Files as chunked arrays: ``load``/``fromfile`` inside ``default_device("dask")``,
``asarray(numpy.memmap(...))`` there, and ``to_zarr``/``from_zarr`` (zarr is optional).

A file is read chunk by chunk on the workers (:class:`FileSource` pickles as its path and
layout, not its data): nothing is loaded on the client.
"""
from __future__ import annotations

import numpy as np

__all__ = ["FileSource", "load", "memmap_array", "whole_file_map", "to_zarr", "from_zarr"]


class FileSource:
    """A raw array in a file (``path``, byte ``offset``, ``shape``, ``dtype``, C order)
    that ``dask.array.from_array`` slices: each slice opens the file as a read-only
    memmap and copies its part."""

    def __init__(self, path: str, offset: int, shape: tuple, dtype):
        self.path = str(path)
        self.offset = int(offset)
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key):
        m = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset,
                      shape=self.shape)
        return np.array(m[key])


def _require_path(name: str, file):
    if not isinstance(file, (str, bytes)) and not hasattr(file, "__fspath__"):
        raise NotImplementedError(f"lazynp: {name} into a chunked (dask) array takes a "
                                  f"file path (each worker opens the file)")
    import os
    return os.fspath(file)


def load(name: str, args: tuple, kwargs: dict, chunks):
    """``numpy.load`` (a ``.npy`` file), ``numpy.fromfile`` (raw binary, ``sep=""``) or
    ``numpy.memmap`` read in ``chunks``; returns a dask array."""
    import dask.array as da
    file = args[0] if args else kwargs.get("file", kwargs.get("filename"))
    path = _require_path(name, file)
    if name == "load":
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                return None                  # (not a .npy file: NumPy's load)
        m = np.load(path, mmap_mode="r")     # (the header only: no data is read)
        shape, dtype, offset = m.shape, m.dtype, m.offset
        if not m.flags.c_contiguous or dtype.hasobject:
            raise NotImplementedError("lazynp: load into a chunked (dask) array: Fortran-"
                                      "ordered or object .npy files are not supported")
        del m
    elif name == "fromfile":
        dtype = np.dtype(args[1] if len(args) > 1 else kwargs.get("dtype", float))
        if kwargs.get("sep", ""):
            raise NotImplementedError("lazynp: fromfile(sep=...) (text) into a chunked "
                                      "(dask) array is not supported")
        offset = int(kwargs.get("offset", 0))
        import os
        count = int(kwargs.get("count", -1))
        n = (os.path.getsize(path) - offset) // dtype.itemsize
        shape = (n if count < 0 else min(count, n),)
    else:                                            # memmap
        dtype = np.dtype(args[1] if len(args) > 1 else kwargs.get("dtype", np.uint8))
        mode = args[2] if len(args) > 2 else kwargs.get("mode", "r+")
        if mode not in ("r", "c", "r+", "readonly", "copyonwrite", "readwrite"):
            raise NotImplementedError("lazynp: memmap(mode='w+') into a chunked (dask) "
                                      "array is not supported")
        offset = int(args[3] if len(args) > 3 else kwargs.get("offset", 0))
        shape = args[4] if len(args) > 4 else kwargs.get("shape")
        if kwargs.get("order", "C") != "C":
            raise NotImplementedError("lazynp: memmap(order='F') into a chunked (dask) "
                                      "array is not supported")
        if shape is None:
            import os
            shape = ((os.path.getsize(path) - offset) // dtype.itemsize,)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
    src = FileSource(path, offset, shape, dtype)
    if isinstance(chunks, (tuple, list)) and len(chunks) != len(shape):
        chunks = tuple(chunks[:len(shape)]) + ("auto",) * (len(shape) - len(chunks))
    return da.from_array(src, chunks=chunks, asarray=False, fancy=False,
                         name=f"lazynp-{name}-{path}-{offset}-{shape}-{dtype.str}")


def whole_file_map(m: np.memmap) -> bool:
    """True for a C-ordered ``numpy.memmap`` of a file (not a view of one)."""
    import mmap
    return bool(getattr(m, "filename", None)) and isinstance(m.base, mmap.mmap) and \
        m.flags.c_contiguous and not m.dtype.hasobject


def memmap_array(m: np.memmap, chunks):
    """A dask array reading the file behind the memmap ``m`` chunk by chunk."""
    import dask.array as da
    src = FileSource(m.filename, m.offset, m.shape, m.dtype)
    return da.from_array(src, chunks=chunks, asarray=False, fancy=False,
                         name=f"lazynp-memmap-{m.filename}-{m.offset}-{m.shape}-"
                              f"{m.dtype.str}")


def _zarr():
    try:
        import zarr  # noqa: F401
    except ImportError as e:
        raise ImportError("lazynp: to_zarr/from_zarr need the zarr package "
                          "(pip install zarr)") from e
    return zarr


def to_zarr(x, path, client, **kwargs) -> None:
    """Write the chunked array ``x`` to a zarr store at ``path`` chunk by chunk on the
    workers of ``client`` (nothing is gathered).

    Raises
    ------
    ImportError
        When zarr is not installed.
    """
    _zarr()
    client.compute(x.to_dask().to_zarr(path, compute=False, **kwargs)).result()


def from_zarr(path, **kwargs):
    """A dask array reading the zarr store at ``path`` chunk by chunk.

    Raises
    ------
    ImportError
        When zarr is not installed.
    """
    _zarr()
    import dask.array as da
    return da.from_zarr(path, **kwargs)

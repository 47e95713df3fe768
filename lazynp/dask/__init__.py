"""Chunked arrays on dask.distributed: the recorded graph lowered to one dask graph per
flush, each chunk's fused elementwise chain and reduction one Numba kernel (the device
``"dask"``; :mod:`lazynp.dask.array`)."""

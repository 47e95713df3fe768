"""The one exception of the KVStore."""
from __future__ import annotations


class KVStoreError(RuntimeError):
    """A KVStore operation failed.

    Raised at the call for bad input (unknown key, push before ``init``, shape or dtype
    mismatch; nothing is sent to the servers then), and on every waiting push, pull or
    barrier when a server or worker process is lost or does not answer within the store's
    ``timeout``; the message names what was lost (its role, rank or index, dask address
    and process id).
    """

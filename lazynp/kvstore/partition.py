"""Where a key lives: one server chosen by hashing the key, or slices on every server.

MXNet's rule: arrays with more elements than a bound (about 10^6) are split evenly over all
servers so that big transfers use every server's bandwidth; smaller ones live whole on one
server picked by a hash of the key.  The hash is CRC-32 of the key's text (Python's own
``hash`` of a string differs between processes).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

DEFAULT_BIG_ARRAY_BOUND = 1_000_000

Key = int | str


@dataclass(frozen=True)
class Part:
    """One slice ``[start, stop)`` of a key's flattened array, held by server ``server``."""

    server: int
    start: int
    stop: int


@dataclass(frozen=True)
class KeyMeta:
    """What every worker knows about an initialized key (to check calls locally)."""

    key: Key
    shape: tuple[int, ...]
    dtype: np.dtype
    parts: tuple[Part, ...]

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def check_key(key: object) -> Key:
    """Return ``key`` if it is an int or a str, else raise ``TypeError``."""
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(f"a KVStore key must be an int or a str, got {type(key).__name__} "
                        f"{key!r}")
    return key


def key_hash(key: Key) -> int:
    """A hash of ``key`` that is the same in every process."""
    text = f"{'i' if isinstance(key, int) else 's'}:{key}"
    return zlib.crc32(text.encode("utf-8"))


def plan(key: Key, shape: tuple[int, ...], dtype, num_servers: int,
         bound: int = DEFAULT_BIG_ARRAY_BOUND) -> KeyMeta:
    """The placement of ``key``: its parts over ``num_servers`` servers.

    Parameters
    ----------
    key : int or str
    shape : tuple of int
    dtype : numpy dtype
    num_servers : int
    bound : int
        Arrays with more elements than this are split evenly over all servers.
    """
    size = 1
    for s in shape:
        size *= int(s)
    first = key_hash(key) % num_servers
    if size <= bound or num_servers == 1:
        parts = (Part(first, 0, size),)
    else:
        # contiguous slices of the flattened array, as even as integers allow; the first
        # slice goes to the hashed server so that several big keys spread their remainders
        parts = tuple(Part((first + i) % num_servers, i * size // num_servers,
                           (i + 1) * size // num_servers) for i in range(num_servers))
    return KeyMeta(key, tuple(int(s) for s in shape), np.dtype(dtype), parts)


def subkey(key: Key, part_index: int) -> tuple[Key, int]:
    """The name of one part of ``key`` on its server."""
    return (key, part_index)

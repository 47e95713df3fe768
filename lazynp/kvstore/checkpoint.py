"""Checkpoint files: every key's value, optimizer state and update count, one ``.npz``.

The file does not depend on how keys were placed: slices of split keys are joined on save
and cut again on load, so a checkpoint written with two servers loads into one.  Arrays are
stored as NumPy arrays, everything else (keys, shapes, the optimizer's class and parameters,
the caller's ``meta``) as a JSON manifest; nothing is pickled.  A file is written to a
temporary name and renamed, so a process killed while saving leaves the previous checkpoint.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .errors import KVStoreError
from .optimizers import Optimizer, from_config
from .partition import KeyMeta, subkey

FORMAT = "lazynp.kvstore/1"


@dataclass
class Entry:
    """One key of a checkpoint, whole (slices joined)."""

    key: int | str
    value: np.ndarray
    state: dict[str, np.ndarray] = field(default_factory=dict)
    updates: int = 0


def gather(registry: dict, snapshots: Sequence[dict]) -> tuple[list[Entry], Optimizer | None]:
    """Join the servers' snapshots (``ShardStore.snapshot``) into whole keys."""
    entries = []
    optimizer = snapshots[0]["optimizer"] if snapshots else None
    for key, meta in registry.items():
        values, states, updates = [], [], set()
        for i, part in enumerate(meta.parts):
            snap = snapshots[part.server]
            sk = subkey(key, i)
            if sk not in snap["values"]:
                raise KVStoreError(f"checkpoint: server {part.server} does not hold key "
                                   f"{key!r}")
            values.append(np.asarray(snap["values"][sk]).reshape(-1))
            states.append(snap["states"].get(sk, {}))
            updates.add(int(snap["updates"][sk]))
        if len(updates) != 1:
            raise KVStoreError(f"checkpoint: the slices of key {key!r} saw different update "
                               f"counts {sorted(updates)}")
        value = np.concatenate(values).reshape(meta.shape) if len(values) > 1 else \
            values[0].reshape(meta.shape)
        state = {}
        for name in states[0]:
            arrs = [np.asarray(s[name]) for s in states]
            if arrs[0].ndim == 0:          # a counter shared by the slices (Adam's t)
                state[name] = arrs[0]
            else:
                state[name] = np.concatenate([a.reshape(-1) for a in arrs]).reshape(meta.shape)
        entries.append(Entry(key, value, state, updates.pop()))
    return entries, optimizer


def scatter(entries: Sequence[Entry], metas: dict, num_servers: int) -> list[list[tuple]]:
    """Per server, the ``(subkey, value, state, updates)`` items to restore."""
    out: list[list[tuple]] = [[] for _ in range(num_servers)]
    for e in entries:
        meta: KeyMeta = metas[e.key]
        flat = e.value.reshape(-1)
        for i, part in enumerate(meta.parts):
            sl = slice(part.start, part.stop)
            state = {n: (a if a.ndim == 0 else a.reshape(-1)[sl].copy())
                     for n, a in e.state.items()}
            out[part.server].append((subkey(e.key, i), flat[sl].copy(), state, e.updates))
    return out


def write(path: str | os.PathLike, kind: str, entries: Sequence[Entry],
          optimizer: Optimizer | None, meta: dict | None) -> None:
    """Write a checkpoint atomically."""
    arrays: dict[str, np.ndarray] = {}
    keys = []
    for i, e in enumerate(entries):
        arrays[f"value_{i}"] = e.value
        for name, a in e.state.items():
            arrays[f"state_{i}_{name}"] = a
        keys.append({"key": e.key, "key_type": "int" if isinstance(e.key, int) else "str",
                     "shape": list(e.value.shape), "dtype": e.value.dtype.str,
                     "updates": e.updates, "state": sorted(e.state)})
    manifest = {"format": FORMAT, "kind": kind, "keys": keys,
                "optimizer": None if optimizer is None else optimizer.config(),
                "meta": meta}
    try:
        text = json.dumps(manifest)
    except TypeError as exc:
        raise TypeError(f"checkpoint meta must be JSON-serializable: {exc}") from None
    arrays["manifest"] = np.array(text)
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read(path: str | os.PathLike) -> tuple[list[Entry], Optimizer | None, dict | None, str]:
    """Read a checkpoint: ``(entries, optimizer, meta, kind)``."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as z:
            manifest = json.loads(str(z["manifest"]))
            if manifest.get("format") != FORMAT:
                raise KVStoreError(f"{path}: not a lazynp.kvstore checkpoint")
            entries = []
            for i, k in enumerate(manifest["keys"]):
                key = int(k["key"]) if k["key_type"] == "int" else str(k["key"])
                value = z[f"value_{i}"]
                if list(value.shape) != k["shape"] or value.dtype.str != k["dtype"]:
                    raise KVStoreError(f"{path}: key {key!r} does not match its manifest")
                state = {n: z[f"state_{i}_{n}"] for n in k["state"]}
                entries.append(Entry(key, value, state, int(k["updates"])))
    except (OSError, KeyError, ValueError) as exc:
        raise KVStoreError(f"cannot read checkpoint {path}: {exc}") from exc
    return entries, from_config(manifest["optimizer"]), manifest["meta"], manifest["kind"]

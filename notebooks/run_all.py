"""Execute the notebooks top to bottom on a fresh kernel and save them with their outputs.

    python notebooks/run_all.py            # all of them
    python notebooks/run_all.py 03         # those whose name starts with 03
"""
from __future__ import annotations

import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def execute(path: pathlib.Path, timeout: int = 120) -> nbformat.NotebookNode:
    """Run ``path`` with the ``python3`` kernel of this interpreter (lazynp from this
    checkout) and return the executed notebook."""
    nb = nbformat.read(path, as_version=4)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + env_path if env_path else "")
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": str(HERE)}}).execute()
    finally:
        if env_path:
            os.environ["PYTHONPATH"] = env_path
        else:
            del os.environ["PYTHONPATH"]
    return nb


def main(prefixes: list[str]) -> None:
    for path in sorted(HERE.glob("*.ipynb")):
        if prefixes and not any(path.name.startswith(p) for p in prefixes):
            continue
        t0 = time.perf_counter()
        nb = execute(path)
        nbformat.write(nb, path)
        print(f"{path.name}: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])

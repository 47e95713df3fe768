"""Command line: ``python -m lazynp <command>``.

Commands:
  demo    run a few NumPy programs under lazynp and NumPy; show what the engine did,
          check the results, compare the times (exit status 1 on any mismatch)
  train   data-parallel training of an MLP through the KVStore on dask workers
"""
from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lazynp",
        description="lazynp: NumPy with a dependency engine behind it (import lazynp as np).")
    p.add_argument("--version", action="store_true", help="print the lazynp version and exit")
    sub = p.add_subparsers(dest="command", metavar="command")

    d = sub.add_parser("demo", help="run NumPy programs under lazynp and compare with NumPy",
                       description="Run a few NumPy programs with numpy and with lazynp: show "
                                   "ops recorded, flushes, nodes executed, in-place writes, "
                                   "fallbacks; check results; compare times. Exits 1 if any "
                                   "result differs from NumPy.")
    d.add_argument("programs", nargs="*", metavar="program",
                   help="run only these demo programs (default: all; see --list)")
    d.add_argument("--list", action="store_true", help="list the demo programs and exit")
    d.add_argument("--repeat", type=int, default=5,
                   help="timed runs per program and library; the median is shown (default 5)")
    d.add_argument("--no-timing", action="store_true",
                   help="only check results and show the engine counters")
    d.add_argument("--compile-wait", type=float, default=5.0, metavar="SECONDS",
                   help="at most this long per program for background kernel compiles "
                        "before timing (default 5)")
    t = sub.add_parser("train", help="data-parallel MLP training through the KVStore",
                       description="Train a NumPy-style MLP on scikit-learn's digits data "
                                   "(without scikit-learn: a synthetic 10-class task that "
                                   "needs learning) with data-parallel "
                                   "workers on dask, through a KVStore whose servers are dask "
                                   "actors. Without --scheduler an embedded LocalCluster of "
                                   "processes is started. A checkpoint is written after every "
                                   "epoch; --resume continues from one.")
    t.add_argument("--workers", type=int, default=2, help="worker ranks (default 2)")
    t.add_argument("--scheduler", metavar="ADDR", default=None,
                   help="address of a running dask scheduler (default: embedded cluster)")
    t.add_argument("--epochs", type=int, default=5, help="epochs in all (default 5)")
    t.add_argument("--mode", choices=("sync", "async"), default="sync",
                   help="dist_sync (lock-step rounds) or dist_async (default sync)")
    t.add_argument("--servers", type=int, default=1, help="KVStore servers (default 1)")
    t.add_argument("--batch-size", type=int, default=64, help="global batch (default 64)")
    t.add_argument("--hidden", type=int, default=64, help="hidden units (default 64)")
    t.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    t.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("--checkpoint", metavar="PATH", default="lazynp_train_checkpoint.npz",
                   help="checkpoint written after every epoch (default "
                        "lazynp_train_checkpoint.npz; '' for none)")
    t.add_argument("--resume", metavar="PATH", default=None,
                   help="continue from this checkpoint")
    t.add_argument("--timeout", type=float, default=60.0,
                   help="seconds a push/pull/barrier may wait before failing (default 60)")
    t.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="with --scheduler: seconds to reach the scheduler before giving up "
                        "(default 10)")
    t.add_argument("--quiet", action="store_true", help="no progress bar or epoch lines")
    return p


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__
        print(f"lazynp {__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        from .tools import demo as _demo
        if args.list:
            for p in _demo.PROGRAMS:
                print(f"{p.name:22s} {p.description}")
            return 0
        return _demo.main(args.programs or None, repeat=max(1, args.repeat),
                          timing=not args.no_timing, compile_wait=args.compile_wait)
    if args.command == "train":
        from .tools import train as _train
        return _train.main(args)
    parser.error(f"unknown command {args.command!r}")   # pragma: no cover
    return 2


if __name__ == "__main__":
    sys.exit(main())

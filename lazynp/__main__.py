"""Command line: ``python -m lazynp <command>``.

Commands:
  demo    run a few NumPy programs under lazynp and NumPy; show what the engine did,
          check the results, compare the times (exit status 1 on any mismatch)
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
        from . import _demo
        if args.list:
            for p in _demo.PROGRAMS:
                print(f"{p.name:22s} {p.description}")
            return 0
        return _demo.main(args.programs or None, repeat=max(1, args.repeat),
                          timing=not args.no_timing, compile_wait=args.compile_wait)
    parser.error(f"unknown command {args.command!r}")   # pragma: no cover
    return 2


if __name__ == "__main__":
    sys.exit(main())

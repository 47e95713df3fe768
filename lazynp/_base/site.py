"""Find the user's line that called into lazynp (for error messages and fallback stats)."""
from __future__ import annotations

import os
import sys

#: the lazynp package folder (this file lives in its ``_base/``)
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: how tracebacks name the C extension's source (Cython records it relative to the build)
_C_SOURCE = "lazynp/_base/_speedups.pyx"


def in_package(filename: str) -> bool:
    """True for a traceback/frame file name inside lazynp (its C extension included)."""
    return filename.startswith(PACKAGE_DIR) or filename == _C_SOURCE


def user_frame(depth: int = 1):
    """Return the innermost frame outside the lazynp package (None if there is none)."""
    f = sys._getframe(depth)
    while f is not None and f.f_code.co_filename.startswith(PACKAGE_DIR):
        f = f.f_back
    return f


def call_site(depth: int = 1):
    """``(filename, lineno, function)`` of the user's calling line, cheap to take."""
    f = user_frame(depth + 1)
    if f is None:
        return None
    return (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)


def line_of(code, lasti: int):
    """The source line of bytecode offset ``lasti`` in ``code`` (None when unknown)."""
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None


def format_site(site) -> str:
    """Text of a call site: ``(filename, lineno, function)`` or ``(code, bytecode offset)``
    as recorded by the graph."""
    if site is None:
        return "<unknown>"
    if len(site) == 2:
        code, lasti = site
        lineno = line_of(code, lasti)
        filename, func = code.co_filename, code.co_name
    else:
        filename, lineno, func = site
    return f'File "{filename}", line {lineno}, in {func}'

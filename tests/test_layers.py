"""The package's layer order (pyproject.toml, [tool.importlinter]) holds, inside functions too.

``lint-imports`` reads every import statement of every module (at module level and inside
functions) and checks the contracts; a second check here finds any import circle among
lazynp's modules, which the layer contract alone does not forbid inside one layer.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import grimp
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "lazynp")


def _lint_imports(source_root: str) -> subprocess.CompletedProcess:
    """Run import-linter on the ``lazynp`` found in ``source_root`` with its pyproject."""
    env = dict(os.environ, PYTHONPATH=source_root)
    return subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
         " sys.exit(lint_imports_command())", "--no-cache"],
        cwd=source_root, env=env, capture_output=True, text=True, timeout=300)


def _copy_sources(dest: str) -> str:
    """Copy lazynp's Python sources and pyproject.toml into ``dest`` (no build products)."""
    shutil.copytree(PACKAGE, os.path.join(dest, "lazynp"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), dest)
    return dest


def test_the_layer_contracts_are_kept():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout


def test_an_import_pointing_up_breaks_the_contract(tmp_path):
    """The check can fail: an import of the namespace from the policy, inside a function."""
    root = _copy_sources(str(tmp_path))
    with open(os.path.join(root, "lazynp", "core", "policy.py"), "a") as f:
        f.write(textwrap.dedent("""

            def _reaches_up():
                from .._numpy import namespace
                return namespace
            """))
    result = _lint_imports(root)
    assert result.returncode != 0
    assert "lazynp.core.policy -> lazynp._numpy.namespace" in result.stdout


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(
                        graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.append(sorted(members))
    return found


def test_no_module_imports_itself_through_others():
    sys.path.insert(0, ROOT)
    try:
        graph = grimp.build_graph("lazynp", include_external_packages=False, cache_dir=None)
    finally:
        sys.path.remove(ROOT)
    circles = _circles(graph)
    assert circles == [], "import circles (counting imports inside functions):\n" + "\n".join(
        " ".join(c) for c in circles)


def test_the_circle_check_can_fail():
    graph = grimp.ImportGraph()
    for name in ("lazynp", "lazynp.a", "lazynp.b", "lazynp.c"):
        graph.add_module(name)
    graph.add_import(importer="lazynp.a", imported="lazynp.b")
    graph.add_import(importer="lazynp.b", imported="lazynp.c")
    graph.add_import(importer="lazynp.c", imported="lazynp.a")
    assert _circles(graph) == [["lazynp.a", "lazynp.b", "lazynp.c"]]

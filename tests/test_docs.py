"""Every code block of README.md and docs/*.md runs, and what it shows is what it prints.

The convention (also stated in docs/how-it-works.md, "Writing docs"):

* Every fenced ```` ```python ```` block is executed.  The blocks of one Markdown file run in
  order in one fresh Python process and share one namespace (``__name__ == "__main__"``),
  like a doctest session; each block is compiled with its file's name and its real line
  numbers, so a recording line that lazynp reports reads ``README.md:23``.
* A ```` ```output ```` block right after a Python block (blank lines between are allowed) is
  that block's standard output.  It must match exactly, line by line, trailing spaces
  ignored; ``...`` stands for any text, as doctest's ``ELLIPSIS`` (use it only for what
  truly varies: timings, addresses).  A Python block *without* an output block must print
  nothing, so a block cannot print something the page does not show.
* A block that raises fails the test (show an expected error with ``try``/``except`` and
  print it).
* ``<!-- needs: gpu -->`` on a line of its own: the file's blocks need a CUDA device.  They
  run on Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), or on the real GPU when
  ``LAZYNP_TEST_REAL_GPU=1`` (as the other CUDA tests); they are never skipped.
* ```` ```bash ```` blocks are not executed, but their commands are checked: ``pip install``
  extras exist in pyproject.toml, ``python -m lazynp ...`` parses with the real command
  line parser, ``python <script>`` names a file of this repository whose source has every
  ``--option`` the line passes.
* Relative links of the Markdown files point at files that exist.
* ``<!-- picture: FILE = EXPRESSION -->`` on a line of its own: FILE (next to the page) must
  equal the text of EXPRESSION, evaluated where the comment stands (a drawing of the page's
  example).

After editing a page, ``python tests/test_docs.py --update docs/PAGE.md`` writes what each
block prints now into its output block and redraws the page's pictures: review the diff.
``python tests/test_docs.py --session docs/PAGE.md`` prints the blocks' outputs as JSON
(what the tests call).
"""
from __future__ import annotations

import contextlib
import doctest
import io
import json
import os
import re
import shlex
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("**/*.md"))
README_MAX_LINES = 250
SESSION_TIMEOUT_S = 180

_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_NEEDS_GPU = re.compile(r"^<!-- needs: gpu -->$", re.M)                  # on a line of its own


@dataclass
class Block:
    """One fenced block: its language, first code line (1-based), text, and shown output."""
    lang: str
    line: int
    code: str
    output: str | None = None


def parse_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, each Python block with its output block."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = len(m.group(1)), m.group(2)
        start = i + 1
        j = start
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"unclosed code fence at line {i + 1}")
        body = "\n".join(ln[indent:] if ln[:indent].strip() == "" else ln
                         for ln in lines[start:j])
        blocks.append(Block(lang, start + 1, body + "\n"))
        i = j + 1
    # attach each output block to the Python block right before it
    result: list[Block] = []
    for b in blocks:
        if b.lang == "output":
            if not result or result[-1].lang != "python" or result[-1].output is not None:
                raise ValueError(f"output block at line {b.line} follows no Python block")
            result[-1].output = b.code
        else:
            result.append(b)
    return result


def _check_output_adjacency(text: str, blocks: list[Block]) -> None:
    """An output block must come right after its Python block (only blank lines between)."""
    lines = text.splitlines()
    for b in blocks:
        if b.lang != "python" or b.output is None:
            continue
        k = b.line - 1 + b.code.count("\n")     # the closing fence of the Python block
        k += 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        assert k < len(lines) and lines[k].strip() == "```output", \
            f"the output block after the Python block at line {b.line} is not adjacent"


# --- the session: runs in a fresh process ---------------------------------------------------

_PICTURE = re.compile(r"^<!-- picture: (\S+) = (.+?) -->$", re.M)     # on a line of its own


def run_session(path: Path, root: Path = ROOT) -> dict:
    """Execute the Python blocks of ``path`` in order in one namespace.

    Returns ``{"blocks": [...], "pictures": {...}}``: each block's standard output and the
    traceback of an error (the session stops there), and the text of each picture the page
    declares (``<!-- picture: FILE = EXPRESSION -->``, evaluated where it stands: after the
    blocks above it, before those below)."""
    rel = path.relative_to(root).as_posix()
    namespace = {"__name__": "__main__", "__file__": str(path)}
    text = path.read_text(encoding="utf-8")
    results: list[dict] = []
    pictures: dict[str, str] = {}
    pending = [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2))
               for m in _PICTURE.finditer(text)]

    def draw(before_line: float) -> None:
        while pending and pending[0][0] < before_line:
            _, file, expression = pending.pop(0)
            pictures[file] = str(eval(expression, namespace))

    for b in parse_blocks(text):
        if b.lang != "python":
            continue
        draw(b.line)
        out = io.StringIO()
        error = None
        try:
            code = compile("\n" * (b.line - 1) + b.code, rel, "exec")
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
        except BaseException:       # noqa: BLE001 (reported to the test, which fails)
            error = traceback.format_exc()
        results.append({"line": b.line, "stdout": out.getvalue(), "error": error})
        if error:
            return {"blocks": results, "pictures": {}}
    draw(float("inf"))
    return {"blocks": results, "pictures": pictures}


def _session_env(path: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYTHONHASHSEED", "0")
    if _NEEDS_GPU.search(path.read_text(encoding="utf-8")) and \
            env.get("LAZYNP_TEST_REAL_GPU") != "1":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return env


def _start_session(path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--session", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=_session_env(path))


def _session_results(path: Path, proc: subprocess.Popen) -> dict:
    try:
        stdout, stderr = proc.communicate(timeout=SESSION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        raise AssertionError(f"the session of {path.name} ran over {SESSION_TIMEOUT_S} s:\n"
                             f"{stdout[-3000:]}\n{stderr[-3000:]}") from None
    marker = "\n@@results@@\n"
    assert proc.returncode == 0 and marker in stdout, \
        f"the session of {path.name} failed (exit {proc.returncode}):\n" \
        f"{stdout[-3000:]}\n{stderr[-3000:]}"
    return json.loads(stdout.rsplit(marker, 1)[1])


def _run_in_subprocess(path: Path) -> dict:
    return _session_results(path, _start_session(path))


# --- the tests --------------------------------------------------------------------------------

import pytest  # noqa: E402  (the session above runs without pytest)

_CHECKER = doctest.OutputChecker()


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines()) + "\n"


def _ids(paths):
    return [p.relative_to(ROOT).as_posix() for p in paths]


@pytest.fixture(scope="module")
def sessions():
    """One process per page with Python blocks, all started at once (they mostly wait on
    imports and on the engine, so together they take about the time of the longest)."""
    started = {p: _start_session(p) for p in DOC_FILES
               if any(b.lang == "python" for b in parse_blocks(p.read_text(encoding="utf-8")))}
    yield started
    for proc in started.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("path", DOC_FILES, ids=_ids(DOC_FILES))
def test_python_blocks_run_and_print_what_they_show(path, sessions):
    text = path.read_text(encoding="utf-8")
    blocks = [b for b in parse_blocks(text) if b.lang == "python"]
    _check_output_adjacency(text, blocks)
    if not blocks:
        assert path not in sessions
        return
    session = _session_results(path, sessions[path])
    results = session["blocks"]
    failures = []
    for block, res in zip(blocks, results):
        where = f"{path.relative_to(ROOT)}:{block.line}"
        if res["error"]:
            failures.append(f"{where} raised:\n{res['error']}")
            break
        want = _normal(block.output) if block.output is not None else "\n"
        got = _normal(res["stdout"]) if res["stdout"] else "\n"
        if block.output is None and res["stdout"]:
            failures.append(f"{where} prints output the page does not show "
                            f"(add an ```output block):\n{res['stdout']}")
        elif not _CHECKER.check_output(want, got, doctest.ELLIPSIS):
            failures.append(f"{where} shows\n{want}but prints\n{got}")
    else:
        assert len(results) == len(blocks), f"{path.name}: {len(results)} of {len(blocks)} ran"
        for file, drawn in session["pictures"].items():
            if (path.parent / file).read_text(encoding="utf-8") != drawn:
                failures.append(f"{path.relative_to(ROOT)}: {file} is not the picture its "
                                f"example draws now (python tests/test_docs.py --update "
                                f"{path.relative_to(ROOT)} redraws it)")
    assert not failures, "\n\n".join(failures)


def test_every_doc_page_is_checked():
    """The pages under docs/ are Markdown (so the tests above see them), and README links to
    each user guide page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    others = [p for p in (ROOT / "docs").rglob("*") if p.is_file() and p.suffix not in
              (".md", ".svg", ".png")]
    assert not others, f"docs/ holds files the docs test does not read: {others}"
    for page in (ROOT / "docs").glob("*.md"):
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"


def test_readme_fits_one_screen():
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES})"


def test_readme_setup_commands_are_what_ci_runs():
    """The README's first two code blocks are the two set-up commands; the second is the
    command .ci/run runs."""
    blocks = parse_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    first, second = blocks[0], blocks[1]
    assert (first.lang, first.code.strip()) == ("bash",
                                                'pip install -e . && python -m lazynp demo')
    assert second.lang == "bash"
    assert second.code.strip() in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", DOC_FILES, ids=_ids(DOC_FILES))
def test_relative_links_exist(path):
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        file = (path.parent / target.split("#", 1)[0]).resolve()
        if not file.exists():
            missing.append(target)
    assert not missing, f"{path.name} links to missing files: {missing}"


# --- bash blocks: commands that exist ---------------------------------------------------------

def _bash_commands(path: Path):
    for b in parse_blocks(path.read_text(encoding="utf-8")):
        if b.lang != "bash":
            continue
        for k, raw in enumerate(b.code.splitlines()):
            line = raw.split(" #", 1)[0].strip().rstrip("&").strip()
            for part in re.split(r"\s*&&\s*", line):
                if part:
                    yield f"{path.relative_to(ROOT)}:{b.line + k}", shlex.split(part)


def _extras() -> set:
    """The optional-dependency groups of pyproject.toml (tomllib is Python >= 3.11)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+)\s*=", section, flags=re.M))


def _check_command(words: list[str]) -> str | None:
    """None when ``words`` is a real command of this project, else why not."""
    while words and re.match(r"^[A-Z_]+=", words[0]):      # VAR=value prefixes
        words = words[1:]
    if not words:
        return "empty command"
    cmd, args = words[0], words[1:]
    if cmd == "pip":
        if args[:1] != ["install"]:
            return "pip: only 'pip install' is used"
        for a in args[1:]:
            m = re.match(r"^(?:-e\s*)?\.(?:\[([\w,-]+)\])?$", a)
            if a == "-e":
                continue
            if not m:
                return f"pip install of {a!r}, not this package"
            unknown = set(filter(None, (m.group(1) or "").split(","))) - _extras()
            if unknown:
                return f"no extra {sorted(unknown)} in pyproject.toml"
        return None
    if cmd in ("dask",):
        return None if args and args[0] in ("scheduler", "worker") else "unknown dask command"
    if cmd != "python":
        return f"unknown command {cmd!r}"
    if args[:2] == ["-m", "lazynp"]:
        sys.path.insert(0, str(ROOT))
        from lazynp.__main__ import _parser
        try:
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                _parser().parse_args(args[2:])
        except SystemExit as e:
            return None if e.code == 0 else f"python -m lazynp rejects {args[2:]}"
        return None
    if args[:2] == ["-m", "pytest"]:
        missing = [a for a in args[2:] if not a.startswith("-") and
                   not (ROOT / a.split("::")[0]).exists()]
        return f"no test file {missing}" if missing else None
    if args and args[0].endswith(".py"):
        script = ROOT / args[0]
        if not script.exists():
            return f"no script {args[0]}"
        source = script.read_text(encoding="utf-8")
        if "from _common import" in source:     # the benchmarks' shared options
            source += (script.parent / "_common.py").read_text(encoding="utf-8")
        bad = [a.split("=")[0] for a in args[1:] if a.startswith("--") and
               f'"{a.split("=")[0]}"' not in source]
        return f"{args[0]} has no option {bad}" if bad else None
    return f"unknown python command {args}"


@pytest.mark.parametrize("path", DOC_FILES, ids=_ids(DOC_FILES))
def test_bash_blocks_name_real_commands(path):
    problems = [f"{where}: {why}" for where, words in _bash_commands(path)
                if (why := _check_command(words))]
    assert not problems, "\n".join(problems)


def test_the_checker_is_strict(tmp_path):
    """A page whose block prints other than it shows, or prints without showing, fails."""
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1 + 1)\n```\n\n```output\n3\n```\n\n"
                    "```python\nprint('unshown')\n```\n")
    blocks = [b for b in parse_blocks(page.read_text()) if b.lang == "python"]
    assert [b.output for b in blocks] == ["3\n", None]
    results = run_session(page, root=tmp_path)["blocks"]
    assert results[0]["stdout"] == "2\n"
    assert not _CHECKER.check_output(_normal(blocks[0].output), _normal(results[0]["stdout"]),
                                     doctest.ELLIPSIS)
    assert results[1]["stdout"] == "unshown\n"       # and no output block: the test fails it


def test_a_picture_is_drawn_where_its_comment_stands(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nv = 'first'\n```\n\n<!-- picture: p.txt = v.upper() -->\n\n"
                    "```python\nv = 'second'\n```\n")
    assert run_session(page, root=tmp_path)["pictures"] == {"p.txt": "FIRST"}


# --- generated benchmark tables ----------------------------------------------------------------

def _benchmark_helpers():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _common
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return _common


def test_benchmark_tables_state_where_their_figures_come_from():
    tables = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
    assert tables, "no generated benchmark tables"
    for table in tables:
        head = table.read_text(encoding="utf-8").split("\n|", 1)[0]
        for field in ("date", "machine", "commit"):
            assert re.search(rf"^\* {field}: \S", head, re.M), f"{table.name}: no {field}"
        assert re.search(r"^\* (command|source): \S", head, re.M), f"{table.name}: no source"
        assert f"benchmarks/{table.name}" in (ROOT / "docs" / "benchmarks.md").read_text(
            encoding="utf-8"), f"docs/benchmarks.md does not link {table.name}"


def test_write_table_flag_writes_the_summary(tmp_path, monkeypatch):
    """``--write-table`` makes Summary.print write the table, with date, machine, commit."""
    common = _benchmark_helpers()
    monkeypatch.setattr(common, "TABLES_DIR", tmp_path)
    monkeypatch.setattr(common, "_write_table_requested", False)
    monkeypatch.setattr(sys, "argv", ["benchmarks/example.py", "--write-table"])
    args = common.parse_args("example", ["--quick", "--write-table"])
    assert args.write_table and common._write_table_requested
    summary = common.Summary()
    summary.add("W1 | a pipe", target=">= 2x", measured="2.50x", ok=True)
    summary.add("info row", target="", measured="7 ms", ok=True, kind="info")
    with contextlib.redirect_stdout(io.StringIO()):
        assert summary.print() == 0
    text = (tmp_path / "example.md").read_text(encoding="utf-8")
    assert "* command: `python benchmarks/example.py --write-table`" in text
    assert re.search(r"^\* date: \d{4}-\d\d-\d\d \d\d:\d\d UTC$", text, re.M)
    assert re.search(r"^\* machine: .*logical CPUs.*NumPy \d", text, re.M)
    assert re.search(r"^\* commit: ([0-9a-f]{7,}|unknown)", text, re.M)
    assert "| W1 \\| a pipe | >= 2x | 2.50x | PASS |" in text
    assert "| info row |  | 7 ms | - |" in text


def test_without_the_flag_no_table_is_written(tmp_path, monkeypatch):
    common = _benchmark_helpers()
    monkeypatch.setattr(common, "TABLES_DIR", tmp_path)
    monkeypatch.setattr(common, "_write_table_requested", False)
    common.parse_args("example", ["--quick"])
    summary = common.Summary()
    summary.add("x", target="", measured="1", ok=True)
    with contextlib.redirect_stdout(io.StringIO()):
        summary.print()
    assert not list(tmp_path.iterdir())


# --- updating a page after an edit ---------------------------------------------------------------

def update_page(path: Path) -> None:
    """Run ``path``'s blocks and write what each prints into its output block (adding or
    removing output blocks), and redraw its pictures.  Review the diff before committing."""
    session = _run_in_subprocess(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = [b for b in parse_blocks("\n".join(lines)) if b.lang == "python"]
    edits = []
    for block, res in zip(blocks, session["blocks"]):
        if res["error"]:
            sys.exit(f"{path}:{block.line} raised:\n{res['error']}")
        end = block.line - 1 + block.code.count("\n")          # the closing fence
        k = end + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k < len(lines) and lines[k].strip() == "```output":
            close = k + 1
            while lines[close].strip() != "```":
                close += 1
            span = (end + 1, close + 1)
        else:
            span = (end + 1, end + 1)
        shown = res["stdout"].rstrip("\n").split("\n") if res["stdout"] else []
        edits.append((span, ["", "```output", *shown, "```"] if shown else []))
    for (start, stop), new in reversed(edits):
        lines[start:stop] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for file, drawn in session["pictures"].items():
        (path.parent / file).write_text(drawn, encoding="utf-8")
    print(f"{path.relative_to(ROOT)}: {len(session['blocks'])} block(s) run, "
          f"{len(session['pictures'])} picture(s) drawn")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--session":
        res = run_session(Path(sys.argv[2]).resolve())
        sys.stdout.write("\n@@results@@\n" + json.dumps(res))
        sys.stdout.flush()
        sys.exit(0)
    if len(sys.argv) >= 3 and sys.argv[1] == "--update":
        for name in sys.argv[2:]:
            update_page(Path(name).resolve())
        sys.exit(0)
    sys.exit(f"usage: python {sys.argv[0]} --session FILE.md | --update FILE.md...")

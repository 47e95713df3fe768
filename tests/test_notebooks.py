"""The notebooks in notebooks/ run top to bottom on a fresh kernel, and render to HTML with
their graph pictures and tables intact."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import threading
import xml.etree.ElementTree as ET

import nbclient            # (the 'test' extra: nbclient, nbformat, nbconvert, ipykernel)
import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NAMES = [p.stem for p in NOTEBOOKS]
#: the longest a notebook may run, all its cells together
NOTEBOOK_LIMIT_S = 120
SVG = "{http://www.w3.org/2000/svg}"
CHROMIUM = "/usr/bin/chromium"

#: the notebooks run so far: name -> the executed notebook, or why it failed (a string)
_executed: dict = {}
#: how many notebooks run at once, each on its own kernel (the machine's two cores: run alone,
#: the six take about 37 s one after the other, 23 s two at a time, 25 s three at a time)
PARALLEL = 2


def _run(name: str):
    """The notebook ``name`` executed on a fresh ``python3`` kernel of this interpreter, or
    why it failed (a string)."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=NOTEBOOK_LIMIT_S, kernel_name="python3",
                                     record_timing=False,
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    stopped = []

    def stop():                 # the whole notebook's limit: interrupt the running cell
        stopped.append(True)
        if client.km is not None:
            client.km.interrupt_kernel()

    timer = threading.Timer(NOTEBOOK_LIMIT_S, stop)
    timer.start()
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        if stopped:
            return f"{name}.ipynb ran longer than {NOTEBOOK_LIMIT_S} s"
        return f"{name}.ipynb: a cell failed:\n{exc}"
    finally:
        timer.cancel()
    return nb


def _run_all(names) -> None:
    """Run the notebooks ``names`` not run yet, ``PARALLEL`` at once, importing this
    checkout's lazynp; their results go to ``_executed``."""
    from concurrent.futures import ThreadPoolExecutor
    todo = [n for n in names if n not in _executed]
    if not todo:
        return
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + old if old else "")
    try:
        with ThreadPoolExecutor(min(PARALLEL, len(todo))) as pool:
            for name, result in zip(todo, pool.map(_run, todo)):
                _executed[name] = result
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def _execute(name: str):
    """The notebook ``name`` executed (cached for the session)."""
    _run_all([name])
    result = _executed[name]
    if isinstance(result, str):
        pytest.fail(result)
    return result


@pytest.fixture(scope="module")
def notebooks_run_together(request):
    """Every notebook this session's tests execute, run together at the first of them."""
    wanted = set()
    for item in request.session.items:
        if item.path == request.node.path:
            callspec = getattr(item, "callspec", None)
            if callspec is not None and item.originalname == "test_notebook_runs_top_to_bottom":
                wanted.add(callspec.params["name"])
            elif item.originalname in ("test_rendered_notebook_has_graphs_and_tables_that_parse",
                                       "test_screenshot_of_a_graph_is_not_blank"):
                wanted.add("03-symbol-and-jit")
    _run_all([n for n in NAMES if n in wanted])


def test_the_notebooks_are_there():
    assert NAMES == ["01-drop-in", "02-autodiff", "03-symbol-and-jit", "04-distributed",
                     "05-gpu", "06-beyond-one-machine"]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_top_to_bottom(name, notebooks_run_together):
    nb = _execute(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebooks_are_saved_with_their_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "run notebooks/run_all.py"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    kinds = {k for c in code for o in c.outputs for k in o.get("data", {})}
    if path.stem != "05-gpu":
        assert "image/png" in kinds, "a matplotlib plot"


def _fragments(html: str, tag: str) -> list:
    return re.findall(rf"<{tag}[\s>].*?</{tag}>", html, re.S)


def _rendered_html() -> str:
    from nbconvert import HTMLExporter
    body, _ = HTMLExporter().from_notebook_node(_execute("03-symbol-and-jit"))
    return body


def test_rendered_notebook_has_graphs_and_tables_that_parse():
    html = _rendered_html()
    graphs = [ET.fromstring(s) for s in _fragments(html, "svg")]
    graphs = [g for g in graphs if g.get("class") == "lazynp-graph"]
    # the Symbol, its explain report, and jit's two plans
    assert len(graphs) >= 4
    for g in graphs:
        boxes = [n for n in g.iter(SVG + "g") if "node" in n.get("class", "").split()]
        assert boxes and all(next(n.iter(SVG + "text"), None) is not None for n in boxes)
        assert float(re.match(r"[\d.]+", g.get("width")).group()) > 0
    tables = [ET.fromstring(t) for t in _fragments(html, "table")
              if 'class="lazynp-table"' in t[:80]]
    assert len(tables) >= 2
    for t in tables:
        rows = list(t.iter("tr"))
        assert len(rows) >= 2 and all(len(list(r)) == len(list(rows[0])) for r in rows)


def test_screenshot_of_a_graph_is_not_blank(tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"headless Chromium is not installed at {CHROMIUM}: screenshot check "
                    f"skipped")
    import matplotlib.image
    html = _rendered_html()
    svg = next(s for s in _fragments(html, "svg") if 'class="lazynp-graph"' in s[:400])
    page = tmp_path / "graph.html"
    page.write_text(f"<!DOCTYPE html><html><body style='margin:0;background:#fff'>{svg}"
                    f"</body></html>", encoding="utf-8")
    shot = tmp_path / "graph.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={shot}", "--window-size=1000,1000", page.as_uri()],
                   check=True, capture_output=True, timeout=60)
    pixels = matplotlib.image.imread(shot)[..., :3]
    drawn = (pixels < 0.9).any(axis=-1)          # not white: strokes, text, fills
    assert drawn.mean() > 0.005, "the graph drew almost nothing"

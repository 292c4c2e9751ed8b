"""The notebooks run top to bottom as a user runs them, and the %lazykern magics work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lazykern.store.cache import set_default_cache

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# What a run must print, with a GPU or without (then the notebook picks the simulator or the reference).
EXPECTED = {
    "01_quickstart.ipynb": ("[ 0.  3.  6.  9. 12.",),
    "02_tropical_shortest_paths.ipynb": ("matches Dijkstra",),
    "03_graph_capture.ipynb": ("in the CUDA simulator; after step.set(0.5), one replay added 5 ", "on this GPU; after"),
    "04_spin_glass.ipynb": ("ground states",),
    "05_your_own_spin_glass.ipynb": ("ground states (2^",),
    "06_combinatorial_problems.ipynb": ("all 11 problems agree with the brute force",),
}


def test_notebooks_are_stored_without_outputs():
    import nbformat

    assert [p.name for p in NOTEBOOKS] == sorted(EXPECTED)
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_as_a_user_runs_it(path, tmp_path, monkeypatch):
    """No simulator variable is set for the kernel process: without a GPU the notebook chooses."""
    import nbclient
    import nbformat

    for var in [v for v in os.environ if v.startswith("NUMBA_ENABLE_CUDASIM")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}})
    client.execute()
    text = "".join(
        out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
    )
    assert any(expected in text for expected in EXPECTED[path.name]), text[-2000:]


@pytest.fixture
def shell(tmp_path, monkeypatch):
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(tmp_path / "cache"))
    set_default_cache(None)
    ip = interactiveshell.InteractiveShell.instance()
    ip.run_line_magic("load_ext", "lazykern.tools.ipython")
    yield ip
    set_default_cache(None)


def test_magic_cache_warm_and_ls(shell):
    from lazykern import KernelCache
    from lazykern.families.warm import WarmSummary

    cache = shell.run_line_magic("lazykern", "cache")
    assert isinstance(cache, KernelCache) and "<table>" in cache._repr_html_()
    summary = shell.run_line_magic("lazykern", "warm tests._tropical_like:family --kernels 'max*' --arch sm_90")
    assert isinstance(summary, WarmSummary) and summary.ok
    assert sorted(r.name for r in summary.results) == ["maxplus_f32", "maxplus_f32_argmax"]
    assert "2 compiled" in summary._repr_html_() or summary.count("cached") == 2
    rows = shell.run_line_magic("lazykern", "cache ls tropical_like")
    assert sorted(r["kernel"] for r in rows) == ["maxplus_f32", "maxplus_f32_argmax"]
    assert "2 cached kernels" in rows._repr_html_()
    assert shell.run_line_magic("lazykern", "cache ls nothing_here") == []


def test_magic_usage_errors_are_one_line_usage_errors(shell, capsys):
    from IPython.core.error import UsageError

    from lazykern.tools.ipython import lazykern_magic

    for line in ("", "bogus", "cache nope", "cache ls a b", "warm", "warm fam --jobs x", "warm fam --what"):
        with pytest.raises(UsageError, match="usage"):
            lazykern_magic(line)
    with pytest.raises(UsageError, match="unknown family"):
        lazykern_magic("warm nope")
    # Through the shell, as a notebook cell: one line, no traceback.
    shell.run_cell("%lazykern")
    shown = capsys.readouterr()
    text = shown.out + shown.err
    assert "UsageError" in text and "usage: %lazykern" in text and "Traceback" not in text


def test_load_ext_lazykern_registers_the_magic_from_the_package_root(shell):
    shell.run_line_magic("load_ext", "lazykern")
    assert "lazykern" in shell.magics_manager.magics["line"]


def test_import_lazykern_leaves_its_apps_unimported():
    apps = "('lazykern.tools.cli', 'lazykern.tools.ipython')"
    code = f"import sys, lazykern; print(sorted(m for m in sys.modules if m.startswith({apps})))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).parents[1]
    )
    assert out.stdout.strip() == "[]"

"""``import lazykern`` and ``lazykern --help`` import no heavy module (timing targets: benchmarks/import_time.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "numba", "numba_cuda", "cuda", "diskcache")
# What `lazykern --help` has no use for: the commands' own modules load when a command runs.
COMMAND_MODULES = (
    "lazykern.families.warm",
    "lazykern.families",
    "lazykern.compile.compiler",
    "lazykern.store.cache",
    "lazykern.tools.bench",
    "lazykern.tools.demo",
    "lazykern.tools.cli._demo",
    "platformdirs",
    "rich.progress",
    "concurrent.futures.process",
)


def imported_modules(*args: str) -> set[str]:
    """Every module ``python -X importtime ARGS`` imported, read from its import-time report."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("import time:") and "|" in ln]
    assert lines, proc.stderr[-2000:]
    return {ln.rsplit("|", 1)[1].strip() for ln in lines}


def _heavy(modules: set[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy))


@pytest.mark.parametrize(
    "args", [("-c", "import lazykern"), ("-m", "lazykern", "--help")], ids=["import lazykern", "lazykern --help"]
)
def test_no_heavy_module_is_imported(args):
    modules = imported_modules(*args)
    assert "lazykern" in modules
    assert _heavy(modules) == []


def test_help_imports_no_command_module():
    modules = imported_modules("-m", "lazykern", "--help")
    assert {"lazykern.tools.cli", "typer"} <= modules
    assert _heavy(modules, COMMAND_MODULES) == []


def modules_after(code: str) -> set[str]:
    """``sys.modules`` after running ``code`` in a fresh interpreter (this also sees modules imported
    through ``importlib.import_module``, which ``-X importtime`` does not report)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    code += "; import sys; print('\\n'.join(sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return set(proc.stdout.split())


def test_import_lazykern_leaves_heavy_modules_out_of_sys_modules():
    assert _heavy(modules_after("import lazykern")) == []


def test_a_public_name_imports_its_module_on_first_use():
    modules = modules_after("import lazykern; lazykern.KernelCache; lazykern.tropical")
    assert {"lazykern.store.cache", "lazykern.tropical", "numpy"} <= modules

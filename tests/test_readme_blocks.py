"""Every ```python block of README.md and docs/ runs as written, in order, one namespace per file.

A block whose first line starts with ``# needs a GPU`` is left out of the plain run (no GPU here)
and run in Numba's CUDA simulator instead, after the blocks before it; one whose first line also
says the simulator cannot run it is skipped there, with that reason. A block that needs no GPU
but cannot run under the simulator says ``not under the simulator`` on its first line. On a GPU
machine every block runs for real (``-m gpu``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPU_MARK = "# needs a GPU"
NO_SIM = ("simulator cannot", "not under the simulator")
_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)

# The child: runs the blocks in order in one namespace; names the block and its README line on failure.
_CHILD = r"""
import json, sys, traceback
ns = {"__name__": "__readme__"}
for block in json.loads(sys.argv[1]):
    try:
        exec(compile(block["code"], block["where"], "exec"), ns)
    except BaseException:
        traceback.print_exc()
        print("FAILED " + block["where"], file=sys.stderr)
        raise SystemExit(1)
    print("RAN " + block["where"], flush=True)
"""


@dataclass(frozen=True)
class Block:
    file: str
    line: int
    code: str

    @property
    def first_line(self) -> str:
        return self.code.lstrip().splitlines()[0] if self.code.strip() else ""

    @property
    def needs_gpu(self) -> bool:
        return self.first_line.startswith(GPU_MARK)

    @property
    def simulator_runs_it(self) -> bool:
        return not any(words in self.first_line for words in NO_SIM)

    def as_child_input(self) -> dict[str, str]:
        # Leading newlines put each line at its own README line number in tracebacks.
        return {"code": "\n" * (self.line - 1) + self.code, "where": f"{self.file}:{self.line}"}


def blocks_of(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    return [Block(rel, text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def documents() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if blocks_of(p)]


def run_blocks(blocks: list[Block], tmp_path: Path, *, simulator: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["LAZYKERN_CACHE_DIR"] = str(tmp_path / "cache")
    env["NUMBA_ENABLE_CUDASIM"] = "1" if simulator else "0"
    work = tmp_path / "work"  # blocks may write files: never into the checkout
    work.mkdir(exist_ok=True)
    payload = json.dumps([b.as_child_input() for b in blocks])
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, payload], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    ran = [ln[4:] for ln in proc.stdout.splitlines() if ln.startswith("RAN ")]
    assert proc.returncode == 0, f"ran {ran}, then:\n{proc.stderr[-6000:]}"
    assert ran == [b.as_child_input()["where"] for b in blocks]
    return proc


DOCS = documents()
IDS = [p.relative_to(ROOT).as_posix() for p in DOCS]


def test_the_readme_has_blocks_and_gpu_blocks_are_marked_on_their_first_line():
    blocks = blocks_of(ROOT / "README.md")
    assert len(blocks) >= 4 and any(b.needs_gpu for b in blocks)
    for block in blocks:  # a misspelt mark would run a GPU block on the CPU, or hide a plain one
        assert "needs a gpu" not in block.code.lower() or block.needs_gpu, f"{block.file}:{block.line}"


@pytest.mark.parametrize("path", DOCS, ids=IDS)
def test_blocks_that_need_no_gpu_run_as_written(path, tmp_path):
    blocks = [b for b in blocks_of(path) if not b.needs_gpu]
    if not blocks:
        pytest.skip(f"every block of {path.name} needs a GPU")
    run_blocks(blocks, tmp_path, simulator=False)


@pytest.mark.parametrize("path", DOCS, ids=IDS)
def test_gpu_blocks_run_in_the_simulator(path, tmp_path):
    blocks = blocks_of(path)
    if not any(b.needs_gpu for b in blocks):
        pytest.skip(f"no block of {path.name} needs a GPU")
    run_blocks([b for b in blocks if b.simulator_runs_it], tmp_path, simulator=True)


NOT_SIMULATED = [b for p in DOCS for b in blocks_of(p) if b.needs_gpu and not b.simulator_runs_it]


@pytest.mark.parametrize("block", NOT_SIMULATED, ids=[f"{b.file}:{b.line}" for b in NOT_SIMULATED])
def test_gpu_blocks_the_simulator_cannot_run_are_skipped_with_their_reason(block):
    pytest.skip(f"{block.file}:{block.line}: {block.first_line.lstrip('# ')}")


@pytest.mark.gpu
@pytest.mark.parametrize("path", DOCS, ids=IDS)
def test_every_block_runs_on_a_gpu(path, tmp_path):
    run_blocks(blocks_of(path), tmp_path, simulator=False)


PYTEST_BLOCKS = [b for p in DOCS for b in blocks_of(p) if re.search(r"^def test_", b.code, re.MULTILINE)]


@pytest.mark.parametrize("block", PYTEST_BLOCKS, ids=[f"{b.file}:{b.line}" for b in PYTEST_BLOCKS])
def test_a_block_of_tests_passes_under_pytest_as_a_user_runs_it(block, tmp_path):
    """A block that shows pytest tests is a test file: pytest with lazykern's plugin runs it (the simulator
    where there is no GPU, chosen by the plugin, nothing set by hand)."""
    (tmp_path / "test_readme_example.py").write_text(block.code)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAZYKERN_", "NUMBA_ENABLE_CUDASIM"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_readme_example.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    defined = len(re.findall(r"^def test_", block.code, re.MULTILINE))
    assert done.returncode == 0 and f"{defined} passed" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]

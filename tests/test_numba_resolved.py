"""The @lazy_kernel key covers what Numba resolved (issue 25, items 2-4), and a key-completeness
mutation test over a corpus of kernels (tests/_numba_corpus.py).

Every compile happens on the CPU (NVRTC route, sm_80). A case's store entry is built in one process;
then one input the compile read is edited on disk, and a fresh process must either compile again
or be served a binary byte-identical to what compiling now gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import _numba_corpus as corpus

ROOT = str(Path(__file__).resolve().parents[1])
pytestmark = pytest.mark.slow  # about 20 s: seven fresh processes compiling the corpus


def _fresh_process(src: Path, store: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # an edit within the same second must not meet a stale .pyc
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tests._numba_corpus", str(src), str(store)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(next(li for li in proc.stdout.splitlines() if li.startswith("JSON:"))[5:])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """[(applied mutations, report)]: the base twice, then each round of one mutation per case."""
    src, store = tmp_path_factory.mktemp("corpus"), tmp_path_factory.mktemp("store")
    out = []
    for round_index in [0, 0, *range(1, corpus.rounds() + 1)]:
        applied = corpus.write(src, round_index)
        out.append((applied, _fresh_process(src, store)))
    return out


def test_a_warm_store_serves_every_case_without_compiling(runs):
    (_, first), (_, second) = runs[0], runs[1]
    assert all(r["compiled"] for r in first.values())
    # the manifest verifies in a new process: nothing is compiled twice
    assert {case: r["compiled"] for case, r in second.items()} == dict.fromkeys(second, False)
    assert all(r["served"] == r["fresh"] for r in second.values())


def _mutations() -> list[tuple[str, str, int]]:
    return [(case, m[0], i + 1) for case, spec in corpus.CASES.items() for i, m in enumerate(spec[3])]


@pytest.mark.parametrize(("case", "label", "round_index"), _mutations(), ids=lambda v: str(v))
def test_an_edit_of_what_the_compile_read_is_never_served_stale(runs, case, label, round_index):
    base = runs[0][1][case]
    applied, report = runs[round_index + 1]
    assert f"{case}: {label}" in applied
    r = report[case]
    assert r["fresh"] != base["fresh"], f"{label}: the mutation does not change the binary; the case tests nothing"
    assert r["compiled"] or r["served"] == r["fresh"], f"{label}: the store served the binary from before the edit"


def test_key_completeness_mutation_count_and_survivors(runs, capsys):
    survivors, total = [], 0
    for applied, report in runs[2:]:
        for item in applied:
            total += 1
            case = item.split(":", 1)[0]
            r = report[case]
            if not r["compiled"] and r["served"] != r["fresh"]:
                survivors.append(item)
    with capsys.disabled():
        print(f"\nnumba key-completeness: {total} mutations, {len(survivors)} survivors {survivors}")
    assert total == len(_mutations())
    assert survivors == []

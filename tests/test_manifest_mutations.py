"""Key completeness, C++ side (issue 25): mutate one input a compile read, ask the store in a fresh process.

The corpus (tests/_manifest_mutants.py): headers in subdirectories with nested relative includes, a
macro include whose macro another header defines, ``%:include`` of a ``-D`` macro, a toolkit header
(in a copy of the toolkit directory, which the child points lazykern at), a ``__has_include`` probe,
a real tropical kernel, and (issue 35) what only the preprocessor's view shows: a splice or comments
inside ``include``, splices, aliases and comments around ``__has_include``, ``#line`` and line markers
naming existing and missing files, a header with two such directives, a header in ``sub/`` whose
``#line`` names a file elsewhere; and (issue 43) a line splice in a raw string and a trigraph under
``-std=c++14`` that fooled the model, CCCL's probe of the user's directories, a retargeted link and
an ``mv``-swapped -I directory. Each group of cases runs in a fresh process. Mutations: bytes of
every header read, a same-named header appearing in every search place, and every option (dropped,
changed, one added). After each, the store must compile again or serve exactly what compiling now gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(tmp_path, *flags: str) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-m", "tests._manifest_mutants", str(tmp_path), *flags],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# (cases, the fewest mutations they make): a shrinking corpus fails the test too
GROUPS = [
    ("nested,macro,defines", 40),
    ("toolkit,has_include,tropical", 14),
    ("splice_include,comment_include", 20),
    ("probe_splice,probe_alias_comment,probe_comment_splice", 18),
    ("line_existing,line_two", 20),
    ("line_sub,line_generated,line_toolkit", 30),
    ("raw_splice,trigraph,cccl_probe,link_and_swap", 20),
]


@pytest.mark.slow
@pytest.mark.parametrize("cases, fewest", GROUPS, ids=[g[0].split(",")[0] for g in GROUPS])
def test_every_mutation_recompiles_or_serves_what_compiling_now_gives(tmp_path, cases, fewest):
    result = _run(tmp_path, f"--cases={cases}")
    print(f"C++ key completeness, {cases}: {result['mutations']} mutations {result['by_kind']}, {result['survivors']}")
    assert result["mutations"] >= fewest and result["survivors"] == [], result


def test_the_mutations_find_a_store_that_does_not_check_its_headers(tmp_path):
    result = _run(tmp_path, "--blind")
    assert result["survivors"], result

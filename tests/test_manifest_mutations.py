"""Key completeness, C++ side (issue 25): mutate one input a compile read, ask the store in a fresh process.

The corpus (tests/_manifest_mutants.py): headers in subdirectories with nested relative includes, a
macro include whose macro another header defines, ``%:include`` of a ``-D`` macro, a toolkit header
(in a copy of the toolkit directory, which the child points lazykern at), a ``__has_include`` probe,
and a real tropical kernel. Mutations: bytes of every header read, a same-named header appearing in
every search place, and every option (dropped, changed, one added). After each, the store must
compile again or serve exactly what compiling now gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

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


def test_every_mutation_recompiles_or_serves_what_compiling_now_gives(tmp_path):
    result = _run(tmp_path)
    print(
        f"C++ key completeness: {result['mutations']} mutations {result['by_kind']}, survivors: {result['survivors']}"
    )
    assert result["mutations"] >= 60 and result["survivors"] == [], result


def test_the_mutations_find_a_store_that_does_not_check_its_headers(tmp_path):
    result = _run(tmp_path, "--blind")
    assert result["survivors"], result

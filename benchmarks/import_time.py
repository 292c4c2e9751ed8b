"""``python -m benchmarks.import_time [--runs 5]``: wall time of ``import lazykern`` and ``lazykern --help``.

Each is a fresh interpreter; the figure is the median of ``--runs``, next to a bare
``python -c pass`` measured the same way (the interpreter's own start-up). The
target (issue 14) is under 0.15 s for both. ``tests/test_startup_imports.py`` holds
the part that does not depend on the machine: no NumPy, Numba or cuda.* is imported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TARGET_S = 0.15
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import lazykern": [sys.executable, "-c", "import lazykern"],
    "lazykern --help": [sys.executable, "-m", "lazykern", "--help"],
}


def wall(cmd: list[str], runs: int) -> list[float]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    out = {}
    for label, cmd in COMMANDS.items():
        times = wall(cmd, args.runs)
        out[label] = {"median_s": statistics.median(times), "runs_s": times}
        print(f"{label:18} median {statistics.median(times):.3f} s  (runs: {', '.join(f'{t:.3f}' for t in times)})")
    print(json.dumps(out))
    slow = [k for k in ("import lazykern", "lazykern --help") if out[k]["median_s"] > TARGET_S]
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())

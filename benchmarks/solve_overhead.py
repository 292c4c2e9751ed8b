"""Where a repeated ``solve`` spends its host time on the GPU (issue 47): cProfile of one warm call.

    python3 benchmarks/solve_overhead.py --out solve-overhead.json [--rows countingmax2:200,sizemax:200]

Each row solves ``IndependentSet`` of benchmarks/gtn.py's random 3-regular graph with ``module="cupy"``
twice (compiles, plans, warms the pool), then times ``--repeats`` calls (median) and profiles one more
with cProfile (device synchronized after the call): the heaviest functions by their own time and by
cumulative time, so a step's Python overhead (layout, allocation, argument packing, launches) shows
beside the kernels' time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def row(prop_name: str, n: int, repeats: int) -> dict[str, Any]:
    import cupy

    from benchmarks.gtn import regular_graph
    from lazykern.tn import problems as P
    from lazykern.tn import properties as Q
    from lazykern.tn import solve

    prop = {"sizemax": Q.SizeMax(), "countingmax2": Q.CountingMax(2), "countingmax1": Q.CountingMax(1)}[prop_name]
    p = P.IndependentSet(regular_graph(n))

    def call() -> Any:
        out = solve(p, prop, module="cupy")
        cupy.cuda.runtime.deviceSynchronize()
        return out

    call()
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    prof = cProfile.Profile()
    prof.enable()
    result = call()
    prof.disable()
    out: dict[str, Any] = {"prop": prop_name, "n": n, "median_s": round(statistics.median(times), 4),
                           "samples": [round(t, 4) for t in times], "result": str(result)}  # fmt: skip
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats(key).print_stats(30)
        out[key] = [ln for ln in text.getvalue().splitlines() if ln.strip()][:45]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", default="countingmax2:200,sizemax:200")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from lazykern.tools.bench.device import environment

    record: dict[str, Any] = environment(argv) | {"rows": []}
    for spec in args.rows.split(","):
        name, n = spec.split(":")
        record["rows"].append(row(name, int(n), args.repeats))
        print(json.dumps({k: v for k, v in record["rows"][-1].items() if k not in ("tottime", "cumulative")}))
        Path(args.out).write_text(json.dumps(record, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

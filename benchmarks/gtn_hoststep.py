"""Host cost per contraction step of repeated ``solve`` calls (issue 47's scale rows), one process per tree.

    python3 benchmarks/gtn_hoststep.py --out g.json [--rows sizemax:100,countingmax2:100] [--reps 5] [--profile]

Each row is ``IndependentSet`` of ``networkx.random_regular_graph(3, n, seed=n)`` (benchmarks/gtn.py's
instances) solved with ``module="cupy"`` (``--module numpy``: the CPU) once (``first``: plan searched
or read from the store, kernels compiled or loaded) and ``--reps`` more times (``again``: each call's
seconds, its answer read back). ``steps``: pairwise contraction steps per call (``_contract.contract``
calls, every pass of a counting property included), so ``ms_per_step`` = min(again) / steps bounds
the host cost of a step from above (the device's share is small where the steps are: n = 100, 150).
``--profile``: cProfile of one more call of each row, its 30 heaviest functions by own time.
Run it with two trees on one machine and one LAZYKERN_CACHE_DIR (the second process then takes the
first's stored plans: both contract the same orders) to compare them side by side.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any


def row(prop_name: str, n: int, reps: int, module: str, profile: bool) -> dict[str, Any]:
    import networkx as nx

    from lazykern.tn import problems as P
    from lazykern.tn import properties as Q
    from lazykern.tn import solve

    C = importlib.import_module("lazykern.tn._contract")
    try:
        E = importlib.import_module("lazykern.tn.contraction.executor")
    except ModuleNotFoundError:  # a tree from before lazykern/tn/contraction/: the steps ran in einsum.py
        E = importlib.import_module("lazykern.tn.einsum")
    prop = {"sizemax": Q.SizeMax(), "countingmax2": Q.CountingMax(2), "countingmax1": Q.CountingMax()}[prop_name]
    p = P.IndependentSet(nx.random_regular_graph(3, n, seed=n))
    count = [0]
    real = C.contract

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    E.contract = counted  # the executor calls the name it imported
    try:
        start = time.perf_counter()
        result = solve(p, prop, module=module)
        first = time.perf_counter() - start
        again = []
        count[0] = 0
        for _ in range(reps):
            start = time.perf_counter()
            solve(p, prop, module=module)
            again.append(time.perf_counter() - start)
        steps = count[0] / max(reps, 1)
    finally:
        E.contract = real
    out: dict[str, Any] = {
        "first": round(first, 4),
        "again": [round(t, 4) for t in again],
        "steps": steps,
        "ms_per_step": round(min(again) / max(steps, 1) * 1e3, 4),
        "result": str(result),
    }
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        solve(p, prop, module=module)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
        out["profile"] = [ln for ln in text.getvalue().splitlines() if ln.strip()][:45]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--rows", default="sizemax:100,sizemax:150,sizemax:200,countingmax2:100,countingmax2:150,countingmax2:200"
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--module", default="cupy")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    import lazykern

    record: dict[str, Any] = {"tree": str(Path(lazykern.__file__).parent.parent), "tag": args.tag, "argv": sys.argv,
                              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "rows": {}}  # fmt: skip
    if args.module == "cupy":
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        record["device"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        record["driver"] = cupy.cuda.runtime.driverGetVersion()
        record["cupy"] = cupy.__version__
    out = Path(args.out)
    for spec in args.rows.split(","):
        prop_name, n = spec.split(":")
        reps = args.reps if int(n) < 200 else max(2, args.reps // 2)
        record["rows"][spec] = row(prop_name, int(n), reps, args.module, args.profile)
        print(spec, json.dumps({k: v for k, v in record["rows"][spec].items() if k != "profile"}), flush=True)
        out.write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Listing configurations on the host: ConfigsAll of a 3-regular 36-vertex graph's 6,668,100 independent
sets and ConfigsMax(2) of benchmarks/gtn.py's 100-vertex graph (63,883 configurations), NumPy module;
seconds and a digest of the answer (run two checkouts side by side with PYTHONPATH).

    python3 benchmarks/configs_listing.py
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

import networkx as nx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gtn  # noqa: E402

import lazykern  # noqa: E402
from lazykern.tn import problems as P  # noqa: E402
from lazykern.tn import properties as Q  # noqa: E402
from lazykern.tn import solve  # noqa: E402


def main() -> None:
    out: dict[str, object] = {"lazykern": lazykern.__file__}
    p = P.IndependentSet(nx.random_regular_graph(3, 36, seed=1))
    start = time.perf_counter()
    every = solve(p, Q.ConfigsAll(limit=10**7))
    out["configs_all_s"] = round(time.perf_counter() - start, 2)
    out["configs_all_rows"] = int(every.shape[0])
    out["configs_all_sha256"] = hashlib.sha256(every.tobytes()).hexdigest()[:16]
    q = P.IndependentSet(gtn.regular_graph(100))
    solve(q, Q.ConfigsMax(k=2))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        best = solve(q, Q.ConfigsMax(k=2))
        times.append(time.perf_counter() - start)
    out["configs_max2_n100_s"] = round(sorted(times)[1], 3)
    out["configs_max2_sha256"] = hashlib.sha256(b"".join(c.tobytes() for _, c in best)).hexdigest()[:16]
    print(json.dumps(out))


if __name__ == "__main__":
    main()

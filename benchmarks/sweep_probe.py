"""Where the time of a lattice sweep goes on the GPU: the big step's product alone, then a whole
contraction with every product timed (synchronized) by shape class.

    python3 benchmarks/sweep_probe.py --L 28 --out /tmp/probe.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from typing import Any

import numpy as np


def product_rate(cupy: Any, batch: int, M: int, K: int, N: int, reps: int = 5) -> dict[str, Any]:
    from lazykern import tropical

    A = cupy.ones((batch, M, K), cupy.float32)
    B = cupy.ones((batch, K, N), cupy.float32)
    tropical.bmm(A, B)
    cupy.cuda.runtime.deviceSynchronize()
    start = time.perf_counter()
    for _ in range(reps):
        C = tropical.bmm(A, B)
    cupy.cuda.runtime.deviceSynchronize()
    seconds = (time.perf_counter() - start) / reps
    moved = A.nbytes + C.nbytes
    return {"shape": [batch, M, K, N], "ms": round(seconds * 1e3, 3), "gbps": round(moved / seconds / 1e9, 1)}


def step_times(cupy: Any, L: int) -> dict[str, Any]:
    import importlib
    from unittest import mock

    from lazykern.tn import networks as nw
    from lazykern.tn.einsum import contract_network

    algebra = importlib.import_module("lazykern.tn.einsum").Algebra  # the class every step's product goes through

    sg = nw.square_lattice(L, seed=L)
    plan = nw.plan(sg, module=cupy, dtype=np.float32)
    labels, tensors = sg.network(np.float32, cupy)
    spent: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    inner = algebra.bmm

    def timed_bmm(self: Any, A: Any, B: Any, argmax: bool) -> Any:
        cupy.cuda.runtime.deviceSynchronize()
        start = time.perf_counter()
        out = inner(self, A, B, argmax)
        cupy.cuda.runtime.deviceSynchronize()
        a, b = A[0], B[0]
        key = f"{tuple(a.shape)}x{tuple(b.shape)}" if max(a.size, b.size) >= 2 ** (L - 2) else "small"
        spent[key] += time.perf_counter() - start
        count[key] += 1
        return out

    start = time.perf_counter()
    with mock.patch.object(algebra, "bmm", timed_bmm):
        out = contract_network(labels, (), tensors, optimize=plan)
    cupy.cuda.runtime.deviceSynchronize()
    total = time.perf_counter() - start
    rows = {k: {"calls": count[k], "seconds": round(v, 4)} for k, v in spent.most_common(8)}
    return {"L": L, "energy": -float(out), "total_seconds": round(total, 3), "products": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--L", type=int, default=28)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import cupy

    record = {
        "products": [product_rate(cupy, *s) for s in ((2, 2**28, 8, 8), (1, 2**29, 8, 8), (2, 2**29, 4, 4))],
        "sweep": step_times(cupy, args.L),
    }
    print(json.dumps(record, indent=1), flush=True)
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

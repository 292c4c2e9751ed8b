"""Host work of the k-best steps on the CPU machine: ``solve`` run through the GPU route's host stand-in.

    PYTHONPATH=. python3 benchmarks/kbest_hoststep_cpu.py [--rows countingmax2:100,sizemax:100] [--reps 15]

The stand-in is the one tests/test_tn_contract.py uses: a ``cupy`` backend over NumPy arrays, so every
layout decision, copy (the bit permutation through its host reference), allocation and ``prepare`` of the
device route runs; only the product is NumPy's array-operation k-best product (the GPU's ``tn_kbest``
launch is not reached without a GPU). Counted per call: pairwise steps, ``Backend.strides`` reads, new
arrays (``Backend.empty``), permutation copies and their launches, ``% p`` reductions in ``prepare``.
Timed per call (medians of ``--reps`` repeated calls): ``_contract._arrange`` and ``prepare``, the
host work these counts measure (the product's NumPy time is excluded: it stands for a device kernel).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from typing import Any

import numpy as np


def row(prop_name: str, n: int, reps: int) -> dict[str, Any]:
    import networkx as nx

    from lazykern.tn import problems as P
    from lazykern.tn import properties as Q
    from lazykern.tn import solve

    B = importlib.import_module("lazykern.tn._backend")
    C = importlib.import_module("lazykern.tn._contract")
    OP = importlib.import_module("lazykern.tn.contraction.operands")  # wraps a network's operands
    E = importlib.import_module("lazykern.tn.contraction.executor")  # runs its steps
    # the solver modules that read the backend of a device array (configurations, the polynomial's memory)
    S = [importlib.import_module(f"lazykern.tn.solving.{m}") for m in ("configurations", "graph_poly")]
    K = importlib.import_module("lazykern.tn.algebras.kbest")
    M = importlib.import_module("lazykern.tn._permute")
    prop = {"sizemax": Q.SizeMax(), "countingmax2": Q.CountingMax(2), "sizemax2": Q.SizeMax(2)}[prop_name]
    p = P.IndependentSet(nx.random_regular_graph(3, n, seed=n))

    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    patches: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, wrap: Any) -> None:
        real = getattr(owner, name)
        patches.append((owner, name, real))
        setattr(owner, name, wrap(real))

    inside = [0]  # > 0 while _arrange runs: the counts below that the GPU route shares (the stand-in's
    # NumPy k-best product makes copies of its own that the tn_kbest kernel does not)

    def counted(key: str, timed: bool = False) -> Any:
        def wrap(real: Any) -> Any:
            def call(*a: Any, **kw: Any) -> Any:
                counts[key] = counts.get(key, 0) + 1
                if inside[0] and not timed:
                    counts[f"{key} in _arrange"] = counts.get(f"{key} in _arrange", 0) + 1
                if not timed:
                    return real(*a, **kw)
                inside[0] += 1
                start = time.perf_counter()
                try:
                    return real(*a, **kw)
                finally:
                    inside[0] -= 1
                    seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - start

            return call

        return wrap

    def stand_in(real: Any) -> Any:
        def call(x: Any) -> Any:
            if isinstance(x, np.ndarray):
                return B.Backend("cupy", np), x
            return real(x)

        return call

    patch(OP, "backend_of", stand_in)
    for module in S:
        patch(module, "backend_of", stand_in)
    patch(E, "contract", counted("steps"))
    patch(C, "_arrange", counted("_arrange", timed=True))
    patch(B.Backend, "strides", counted("strides"))
    patch(B.Backend, "empty", counted("empty"))

    def copies(real: Any) -> Any:  # launches and allocations of _arrange's permutation copies
        def call(be: Any, x: Any, *rest: Any) -> Any:
            out = real(be, x, *rest)
            if out is not None and inside[0]:
                many = isinstance(x, tuple)
                launches = len({be.dtype(p) for p in x}) if many else 1
                counts["copy launches"] = counts.get("copy launches", 0) + launches
                counts["parts copied"] = counts.get("parts copied", 0) + (len(x) if many else 1)
            return out

        return call

    patch(M, "copy", copies)
    if hasattr(M, "copy_parts"):
        patch(M, "copy_parts", copies)
    for cls in (K.KBestAlgebra, K.PairedKBestAlgebra):
        real_prepare = cls.__dict__["prepare"].__func__
        patches.append((cls, "prepare", cls.__dict__["prepare"]))

        def timed_prepare(c: Any, be: Any, parts: Any, position: int, _real: Any = real_prepare) -> Any:
            counts["prepare"] = counts.get("prepare", 0) + 1
            start = time.perf_counter()
            try:
                return _real(c, be, parts, position)
            finally:
                seconds["prepare"] = seconds.get("prepare", 0.0) + time.perf_counter() - start

        cls.prepare = classmethod(timed_prepare)
    try:
        result = solve(p, prop, module="numpy")
        per_call: list[dict[str, float]] = []
        totals = []
        for _ in range(reps):
            counts.clear()
            seconds.clear()
            start = time.perf_counter()
            solve(p, prop, module="numpy")
            totals.append(time.perf_counter() - start)
            per_call.append({**{f"n {k}": v for k, v in counts.items()}, **{f"s {k}": v for k, v in seconds.items()}})
    finally:
        for owner, name, real in reversed(patches):
            setattr(owner, name, real)
    keys = sorted({k for d in per_call for k in d})
    med = {k: statistics.median(d.get(k, 0) for d in per_call) for k in keys}
    out: dict[str, Any] = {"result": str(result), "call_s_median": round(statistics.median(totals), 4)}
    for k, v in med.items():
        out[k] = v if k.startswith("n ") else round(v * 1e3, 3)  # seconds as ms
    steps = med.get("n steps", 1) or 1
    out["arrange+prepare ms/step"] = round((med.get("s _arrange", 0) + med.get("s prepare", 0)) * 1e3 / steps, 4)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="countingmax2:100,countingmax2:150,sizemax2:100")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    record: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "rows": {}}
    for spec in args.rows.split(","):
        prop_name, n = spec.split(":")
        record["rows"][spec] = row(prop_name, int(n), args.reps)
        print(spec, json.dumps(record["rows"][spec]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

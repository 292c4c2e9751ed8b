"""Where ``solve`` spends its time on the GPU (issue 47): a first call's seconds and each step's rate.

    python3 benchmarks/gtn_profile.py --out benchmarks/results/gtn-profile.json [--parts first,steps]

``first``: two fresh processes solving ``IndependentSet`` ``SizeMax`` of the random 3-regular n = 100
graph (benchmarks/gtn.py's instance), the first with an empty lazykern store and an empty CuPy kernel
cache, the second with both as the first left them. Each records its imports, the CUDA context, the
call split by phase (tables, plan, contraction), every kernel compile the ``lazykern`` logger reports
(name, seconds) and cProfile's heaviest functions.

``steps``: for n = 150, n = 200 and the King's 12 x 12 subgraph (SizeMax, and CountingMax(1) / (2)
with ``--counting``), every pairwise contraction step of a repeated call timed alone (synchronized
before and after): its route (``bits``, ``strided`` row kernel, ``bmm`` through lazykern.tropical, or
``kbest`` / other algebra products), its product shape (batch, M, N, K), multiply-adds and rate, and
for the largest steps the same product shape run alone through ``tropical.bmm`` on contiguous operands
(what the GEMM kernels give that shape). The yardstick, ``tropical.matmul`` f32 max-plus on a square
GEMM, is measured in the same process (``gemm``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from benchmarks.gtn_profile import {fn}
print("ROW " + json.dumps({fn}(json.loads({spec!r})), default=str), flush=True)
"""


def run_child(fn: str, spec: dict[str, Any], env: dict[str, str], timeout: float) -> dict[str, Any]:
    code = CHILD.format(root=str(ROOT), fn=fn, spec=json.dumps(spec))
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=os.environ | env
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no answer in {timeout:.0f} s (killed)"}
    rows = [ln[4:] for ln in proc.stdout.splitlines() if ln.startswith("ROW ")]
    if proc.returncode or not rows:
        return {"error": f"exit {proc.returncode}", "stderr": proc.stderr[-3000:]}
    out: dict[str, Any] = json.loads(rows[-1])
    out["process_seconds"] = round(time.perf_counter() - start, 2)
    return out


# ------------------------------------------------------------------ first --
def first_call(spec: dict[str, Any]) -> dict[str, Any]:
    """One fresh process: imports, context, then the timed solve with compiles logged and profiled."""
    import cProfile
    import io
    import logging
    import pstats

    t0 = time.perf_counter()
    import networkx as nx

    t1 = time.perf_counter()
    from lazykern.tn import problems as P
    from lazykern.tn import properties as Q
    from lazykern.tn import solve

    t2 = time.perf_counter()
    import cupy

    cupy.zeros(1).sum()
    cupy.cuda.runtime.deviceSynchronize()
    t3 = time.perf_counter()
    compiles: list[tuple[float, str]] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            compiles.append((round(time.perf_counter() - t3, 4), record.getMessage()))

    log = logging.getLogger("lazykern")
    log.setLevel(logging.DEBUG)
    log.addHandler(Grab())
    g = nx.random_regular_graph(3, spec["n"], seed=spec["n"])
    prop = Q.SizeMax() if spec.get("prop", "sizemax") == "sizemax" else Q.CountingMax(2)
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    result = solve(P.IndependentSet(g), prop, module="cupy")
    cupy.cuda.runtime.deviceSynchronize()
    prof.disable()
    first = time.perf_counter() - start
    start = time.perf_counter()
    solve(P.IndependentSet(g), prop, module="cupy")
    cupy.cuda.runtime.deviceSynchronize()
    again = time.perf_counter() - start
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(45)
    return {
        "imports": {"networkx": round(t1 - t0, 3), "lazykern.tn": round(t2 - t1, 3), "cupy+context": round(t3 - t2, 3)},
        "first": round(first, 4),
        "again": round(again, 4),
        "result": str(result),
        "log": [c for c in compiles if "compil" in c[1] or "kernel" in c[1] or "plan" in c[1]][:80],
        "profile": text.getvalue().splitlines()[:80],
    }


# ------------------------------------------------------------------ steps --
def _sync() -> None:
    """Wait for the GPU (nothing to wait for without CuPy: host arrays are computed when returned)."""
    try:
        import cupy
    except ImportError:
        return
    cupy.cuda.runtime.deviceSynchronize()


def gemm_yardstick(n: int = 4096, dtype: str = "float32") -> dict[str, Any]:
    import cupy

    from lazykern import tropical

    rng = cupy.random.default_rng(0)
    A, B = (rng.standard_normal((n, n), dtype=cupy.float32).astype(dtype) for _ in range(2))
    C = cupy.empty((n, n), dtype)
    tropical.matmul(A, B, out=C)
    _sync()
    reps = 5
    start = time.perf_counter()
    for _ in range(reps):
        tropical.matmul(A, B, out=C)
    _sync()
    s = (time.perf_counter() - start) / reps
    return {"shape": [n, n, n], "dtype": dtype, "seconds": round(s, 6), "tps": round(n**3 / s / 1e12, 3)}


def shape_alone(dims: tuple[int, int, int, int], dtype: str) -> dict[str, Any]:
    """(batch, M, N, K) through tropical.bmm on contiguous operands: what the GEMM kernels give it."""
    import cupy

    from lazykern import tropical

    batch, M, N, K = dims
    A = cupy.zeros((batch, M, K), dtype)
    B = cupy.zeros((batch, K, N), dtype)
    tropical.bmm(A, B)
    _sync()
    reps = 3
    start = time.perf_counter()
    for _ in range(reps):
        tropical.bmm(A, B)
    _sync()
    s = (time.perf_counter() - start) / reps
    return {"seconds": round(s, 6), "tps": round(batch * M * N * K / s / 1e12, 4)}


def record_steps(run: Any) -> tuple[list[dict[str, Any]], float]:
    """``run()`` with every pairwise step and reduction timed alone (synchronized before and after):
    one record per step with its route (``bmm``: the tropical GEMM kernels of lazykern.tropical;
    ``rows``: the strided row kernel; ``bits``: the counting algebra's bit-addressed kernel; else the
    algebra's own product, ``Class.bmm``), the product's operand shapes and strides (elements),
    multiply-adds (the product of every label's extent), seconds, and the seconds of the layout copies
    inside the step (``copy_seconds``, each copy synchronized alone)."""
    import importlib

    from lazykern.tn import counting
    from lazykern.tn.algebras import kbest, logsum, modular

    E = importlib.import_module("lazykern.tn._contract")  # Algebra, Term
    BE = importlib.import_module("lazykern.tn._backend")
    steps: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    patched: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, make: Any) -> None:
        inner = owner.__dict__.get(name)
        if inner is None:  # inherited: the base class's patch sees it
            return
        patched.append((owner, name, inner))
        setattr(owner, name, make(inner, owner))

    def method(kind: str) -> Any:
        def make(inner: Any, owner: Any) -> Any:
            def wrapped(self: Any, X: Any, Y: Any, *rest: Any) -> Any:
                tag = kind if owner is E.Algebra or kind != "bmm" else f"{owner.__name__}.bmm"
                if "route" not in current:
                    current["route"] = tag
                    a, b = X[0], Y[0]
                    current["bmm"] = {
                        "a": [list(map(int, a.shape)), [s // a.itemsize for s in a.strides]],
                        "b": [list(map(int, b.shape)), [s // b.itemsize for s in b.strides]],
                        "dtype": str(a.dtype),
                    }
                return inner(self, X, Y, *rest)

            return wrapped

        return make

    def copies(inner: Any, owner: Any) -> Any:
        def wrapped(self: Any, x: Any) -> Any:
            if self.on_host or self.is_contiguous(x):
                return inner(self, x)
            _sync()
            start = time.perf_counter()
            out = inner(self, x)
            _sync()
            current["copy_seconds"] = current.get("copy_seconds", 0.0) + time.perf_counter() - start
            current["copies"] = current.get("copies", 0) + 1
            return out

        return wrapped

    def timed(kind: str) -> Any:
        def make(inner: Any) -> Any:
            def wrapped(alg: Any, *args: Any) -> Any:
                terms = [x for x in args if isinstance(x, E.Term)]
                sizes: dict[Any, int] = {}
                for term in terms:
                    sizes |= dict(zip(term.labels, (int(n) for n in term.parts[0].shape)))
                current.clear()
                _sync()
                start = time.perf_counter()
                out = inner(alg, *args)
                _sync()
                seconds = time.perf_counter() - start
                flops = math.prod(sizes.values())
                steps.append(
                    {"kind": kind, "algebra": type(alg).__name__, "log2_flops": round(math.log2(max(flops, 1)), 2),
                     "flops": flops, "seconds": seconds, "operands": [math.prod(int(n) for n in t.parts[0].shape)
                     for t in terms], "result": math.prod(int(n) for n in out[0].parts[0].shape), **current}
                )  # fmt: skip
                return out

            return wrapped

        return make

    # Every module that bound the function (``from .._contract import contract``), not only its own:
    # a step the executor runs through a name imported before the patch would go untimed.
    for name in ("contract", "reduce"):
        inner = getattr(E, name)
        wrapped = timed("pair" if name == "contract" else "reduce")(inner)
        for mod in [m for n, m in list(sys.modules.items()) if n.startswith("lazykern.")]:
            if getattr(mod, name, None) is inner:
                patched.append((mod, name, inner))
                setattr(mod, name, wrapped)
    classes = (E.Algebra, counting.CountingAlgebra, kbest.KBestAlgebra, kbest.PairedKBestAlgebra)
    for cls in (*classes, logsum.LogSumAlgebra, modular.ModularAlgebra):
        for kind in ("bmm", "rows", "bits"):
            patch(cls, kind, method(kind))
    patch(BE.Backend, "contiguous", copies)
    try:
        t = time.perf_counter()
        run()
        _sync()
        seconds = time.perf_counter() - t
    finally:
        for owner, name, inner in reversed(patched):
            setattr(owner, name, inner)
    if not steps:  # the hooks missed the contraction: no rate is better than a rate of nothing
        raise RuntimeError("record_steps: no contraction step was timed (the hooks did not see the executor's steps)")
    return steps, seconds


def summarize(steps: list[dict[str, Any]], gemm: dict[str, Any], top: int = 6, share: float = 0.9) -> dict[str, Any]:
    """The steps by route, the ``top`` largest (by multiply-adds) with their rate against ``gemm``'s and,
    for those that ran as ``bmm``, the same product shape alone through tropical.bmm on contiguous
    operands; ``bulk``: the largest steps that hold ``share`` of all multiply-adds, their rate and ratio."""
    steps = sorted(steps, key=lambda s: -s["flops"])
    total = sum(s["flops"] for s in steps)
    for s in steps[:top]:
        s["tps"] = s["flops"] / s["seconds"] / 1e12
        s["gemm_ratio"] = round(s["tps"] / gemm["tps"], 4)
        if s.get("route") == "bmm" and "bmm" in s and len(s["bmm"]["a"][0]) == 3:
            (ba, M, K), (bb, _, N) = s["bmm"]["a"][0], s["bmm"]["b"][0]
            s["alone"] = shape_alone((max(ba, bb), M, N, K), s["bmm"]["dtype"])
            s["alone"]["gemm_ratio"] = round(s["alone"]["tps"] / gemm["tps"], 4)
    bulk, acc = [], 0
    for s in steps:
        if acc >= share * total:
            break
        bulk.append(s)
        acc += s["flops"]
    seconds = sum(s["seconds"] for s in bulk)
    by_route: dict[str, list[float]] = {}
    for s in steps:
        r = by_route.setdefault(s.get("route", "?"), [0, 0.0, 0])
        r[0] += s["flops"]
        r[1] += s["seconds"]
        r[2] += 1
    bulk_tps = acc / seconds / 1e12 if seconds else None
    return {
        "steps": len(steps),
        "log2_flops": round(math.log2(max(total, 1)), 2),
        "step_seconds": round(sum(s["seconds"] for s in steps), 4),
        "by_route": {
            k: {"log2_flops": round(math.log2(max(v[0], 1)), 2), "seconds": round(v[1], 4), "steps": v[2]}
            for k, v in by_route.items()
        },  # fmt: skip
        "bulk": {
            "steps": len(bulk),
            "share": share,
            "seconds": round(seconds, 6),
            "tps": bulk_tps,
            "gemm_ratio": round(bulk_tps / gemm["tps"], 4) if bulk_tps else None,
        },  # fmt: skip
        "largest": [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in s.items()} for s in steps[:top]],
    }


def step_profile(spec: dict[str, Any]) -> dict[str, Any]:
    """Every step of a repeated solve, timed alone, with its route and shape."""
    import networkx as nx

    sys.path.insert(0, str(ROOT))
    from benchmarks.gtn import kings_graph
    from lazykern.tn import problems as P
    from lazykern.tn import properties as Q
    from lazykern.tn import solve

    graph = kings_graph(12) if spec["graph"] == "kings" else nx.random_regular_graph(3, spec["n"], seed=spec["n"])
    prop = {"sizemax": Q.SizeMax(), "countingmax1": Q.CountingMax(), "countingmax2": Q.CountingMax(2)}[spec["prop"]]
    p = P.IndependentSet(graph)
    gemm = gemm_yardstick()
    t = time.perf_counter()
    solve(p, prop, module="cupy")
    _sync()
    first = time.perf_counter() - t
    t = time.perf_counter()
    solve(p, prop, module="cupy")
    _sync()
    again = time.perf_counter() - t
    steps, instrumented = record_steps(lambda: solve(p, prop, module="cupy"))
    row = {"graph": spec["graph"], "n": graph.number_of_nodes(), "prop": spec["prop"], "gemm": gemm}
    row |= {"first": round(first, 4), "again": round(again, 4), "instrumented": round(instrumented, 4)}
    row |= summarize(steps, gemm, top=spec.get("top", 8))
    if spec.get("tiles"):
        row["tiles"] = [tile_sweep(s) for s in row["largest"][:3] if s.get("route") == "bmm"]
    return row


def tile_sweep(step: dict[str, Any]) -> dict[str, Any]:
    """A step's product shape alone through each tile variant that takes it (forced_tile)."""
    from lazykern.tropical import api

    (ba, M, K), (bb, _, N) = step["bmm"]["a"][0], step["bmm"]["b"][0]
    dims = (max(ba, bb), M, N, K)
    out: dict[str, Any] = {"dims": list(dims)}
    for tile in ("", "s", "t", "splitk"):
        try:
            with api.forced_tile(tile):
                out[tile or "large"] = shape_alone(dims, step["bmm"]["dtype"])["tps"]
        except Exception as exc:  # a tile that does not take the shape: say so
            out[tile or "large"] = f"{type(exc).__name__}: {exc}"[:120]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--parts", default="first,steps")
    parser.add_argument("--counting", action="store_true", help="steps of CountingMax(1) / (2) too")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--tiles", action="store_true", help="the largest bmm steps' shapes through each tile")
    parser.add_argument("--rows", default="", help="steps rows (graph:n:prop,...); default n=150, 200, King's")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from lazykern.tools.bench.device import environment

    record: dict[str, Any] = environment(argv) | {"first": {}, "steps": {}}
    out = Path(args.out)
    parts = set(args.parts.split(","))
    if "first" in parts:
        store = tempfile.mkdtemp(prefix="gtn-store-")
        kcache = tempfile.mkdtemp(prefix="gtn-cupy-")
        env = {"LAZYKERN_CACHE_DIR": store, "CUPY_CACHE_DIR": kcache}
        for label in ("empty_store", "warm_store"):
            record["first"][label] = run_child("first_call", {"n": 100}, env, args.timeout)
            print(label, json.dumps(record["first"][label])[:4000], flush=True)
            out.write_text(json.dumps(record, indent=1, default=str))
    if "steps" in parts:
        rows = [("regular", 150, "sizemax"), ("regular", 200, "sizemax"), ("kings", 12, "sizemax")]
        if args.rows:
            rows = [(g, int(n), p) for g, n, p in (r.split(":") for r in args.rows.split(","))]
        elif args.counting:
            rows += [("regular", 200, "countingmax2"), ("kings", 12, "countingmax1")]
        for graph, n, prop in rows:
            name = f"{graph}{n}_{prop}"
            spec = {"graph": graph, "n": n, "prop": prop, "tiles": args.tiles}
            record["steps"][name] = run_child("step_profile", spec, {}, args.timeout)
            print(name, json.dumps(record["steps"][name])[:6000], flush=True)
            out.write_text(json.dumps(record, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

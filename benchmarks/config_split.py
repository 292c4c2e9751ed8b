"""Issue 44's configuration row: one 32 x 32 ground-state configuration against the energy, and where it goes.

    python3 benchmarks/config_split.py --out /tmp/config.json --tree new=. --tree base=/path/to/base
    python3 benchmarks/config_split.py --quick --module numpy --out /tmp/c.json --tree new=.   # a dry run

Each row is a fresh process (``module="cupy"``, +-J couplings from a shuffled edge list, no positions, the
public defaults, one store shared by all rows), with ``PYTHONPATH`` pointing at one ``--tree`` (a checkout
of lazykern: the branch and a baseline are measured in the same run, alternately):

* ``warm``: an energy and a configuration, untimed: the plans and kernels go into the store;
* ``measure``: the energy (plan stored) then one configuration, uninstrumented (the device synchronized
  at each end): ``energy_seconds``, ``configuration_seconds`` and their ratio, the answers checked;
* ``profile``: the configuration with its parts timed (each synchronized): the split of the memory
  (``backtracking``: keep, checkpoints, its planning seconds, the recomputation it predicts), the
  forward argmax pass, and every backtracking segment (its top, steps run, their host seconds, the
  GPU span of each step between CUDA events, wall seconds), plus the choices read back.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tn_scale_split import header  # noqa: E402  (the record's date, command, devices, Python)

CHILD = r"""
import importlib, json, sys, time
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["bench_dir"])
import numpy as np
if spec["module"] == "cupy":
    import cupy as cp
    def sync():
        cp.cuda.Device().synchronize()
    def event():
        e = cp.cuda.Event(); e.record(); return e
    def span(e0, e1):
        return cp.cuda.get_elapsed_time(e0, e1) / 1e3
    cp.zeros(1) + 1  # the context, outside the timed calls
else:
    def sync():
        pass
    def event():
        return time.perf_counter()
    def span(e0, e1):
        return 0.0
import lazykern
from lazykern.tn import networks as nw
import spin_glass as bench
try:
    N = importlib.import_module("lazykern.tn.contraction.network").Network
    X = importlib.import_module("lazykern.tn.contraction.executor")  # the steps a run and a segment contract
    A = importlib.import_module("lazykern.tn.contraction.argmax")  # the backtracking
except ModuleNotFoundError:  # a tree from before lazykern/tn/contraction/: all of it in einsum.py
    X = A = importlib.import_module("lazykern.tn.einsum")
    N = X._Network
sg = bench.edge_list_instance(spec["graph"], shuffle=True, positions=False)
record = {"tree": spec["tree"], "lazykern": lazykern.__file__, "mode": spec["mode"]}
module = spec["module"]

if spec["mode"] == "profile":
    prof = {"segments": [], "reads": [0, 0.0]}
    _bt = N.backtracking
    def backtracking(self, plan, free):
        t = time.perf_counter()
        keep, save, budget = _bt(self, plan, free)
        steps, tree = self.priced(plan)
        if hasattr(tree, "redone"):
            segments, flops, runs = tree.redone(keep, save, budget, self.entry_bytes)
        else:
            (segments, flops), runs = tree.recomputed(keep, save, budget, self.entry_bytes), None
        prof["backtracking"] = {
            "seconds": round(time.perf_counter() - t, 3), "keep": keep, "checkpoints": len(save),
            "checkpoints_over_2^20": sorted(int(steps[n].result).bit_length() - 1 for n in save
                                            if steps[n].result > 2**20),
            "segment_bytes": budget, "predicted_segments": segments,
            "predicted_recomputed_runs": round(flops / max(sum(s.flops for s in steps), 1), 3),
            "predicted_steps_redone": runs, "free_bytes": free, "run_steps": len(steps)}
        return keep, save, budget
    N.backtracking = backtracking
    _run = N.run
    def run(self, *a, **k):
        sync(); t = time.perf_counter()
        out = _run(self, *a, **k)
        sync(); prof["forward_seconds"] = round(time.perf_counter() - t, 3)
        return out
    N.run = run
    calls = []  # (host seconds, start event, end event) of each step a segment runs
    def timed(fn):
        def wrapper(*a, **k):
            e0 = event(); t = time.perf_counter()
            out = fn(*a, **k)
            calls.append((time.perf_counter() - t, e0, event()))
            return out
        return wrapper
    _contract, _reduce = X.contract, X.reduce
    _recompute = N.recompute
    def recompute(self, top, values, found, budget):
        X.contract, X.reduce = timed(_contract), timed(_reduce)
        calls.clear()
        sync(); t = time.perf_counter()
        try:
            _recompute(self, top, values, found, budget)
        finally:
            X.contract, X.reduce = _contract, _reduce
        sync()
        wall = time.perf_counter() - t
        prof["segments"].append({"top": top, "steps": len(calls), "seconds": round(wall, 4),
                                 "host_seconds": round(sum(c[0] for c in calls), 4),
                                 "gpu_seconds": round(sum(span(c[1], c[2]) for c in calls), 4),
                                 "found": len(found)})
    N.recompute = recompute
    _unravel = A.unravel
    def unravel(*a, **k):
        t = time.perf_counter()
        out = _unravel(*a, **k)
        prof["reads"][0] += 1; prof["reads"][1] += time.perf_counter() - t
        return out
    A.unravel = unravel
    _back = A._backtrack
    def backtrack(*a, **k):
        sync(); t = time.perf_counter()
        _back(*a, **k)
        sync(); prof["backtrack_seconds"] = round(time.perf_counter() - t, 3)
    A._backtrack = backtrack

def timed_call(fn):
    sync(); t = time.perf_counter()
    out = fn()
    sync()
    return out, round(time.perf_counter() - t, 3)

if spec["mode"] in ("warm", "measure"):
    energy, record["energy_seconds"] = timed_call(lambda: nw.ground_state_energy(sg, module=module))
    record["energy"] = float(energy)
(E0, spins), record["configuration_seconds"] = timed_call(lambda: nw.ground_state(sg, module=module))
record["configuration_energy"] = [float(E0), float(sg.energy(spins))]
if "energy" in record:
    record["ratio"] = round(record["configuration_seconds"] / record["energy_seconds"], 2)
    record["exact"] = record["energy"] == float(E0) == float(sg.energy(spins))
if spec["mode"] == "profile":
    segs = prof["segments"]
    prof["segment_totals"] = {"segments": len(segs), "steps": sum(s["steps"] for s in segs),
                              "seconds": round(sum(s["seconds"] for s in segs), 3),
                              "host_seconds": round(sum(s["host_seconds"] for s in segs), 3),
                              "gpu_seconds": round(sum(s["gpu_seconds"] for s in segs), 3)}
    prof["reads"] = {"count": prof["reads"][0], "seconds": round(prof["reads"][1], 3)}
    record["profile"] = prof
print(json.dumps(record))
"""


def child(spec: dict[str, Any], tree: str, cache: str, timeout: float) -> dict[str, Any]:
    """One row in a fresh process importing lazykern from ``tree``, with store ``cache``."""
    spec = spec | {"bench_dir": str(Path(__file__).resolve().parent)}
    path = [str(Path(tree).resolve()), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = dict(os.environ, LAZYKERN_CACHE_DIR=cache, PYTHONPATH=os.pathsep.join(path))
    start = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(spec)],
            capture_output=True, text=True, timeout=timeout, env=env, cwd=tree,
        )  # fmt: skip
        row = json.loads(out.stdout.splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-3000:]}
    except subprocess.TimeoutExpired:
        row = {"error": f"no answer within {timeout:g} s (the child was killed)"}
    return spec | row | {"process_seconds": round(time.perf_counter() - start, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tree", action="append", required=True, help="name=path of a lazykern checkout")
    ap.add_argument("--quick", action="store_true", help="an 8 x 8 lattice")
    ap.add_argument("--module", default="cupy", help="numpy: a dry run of the bookkeeping on the host")
    ap.add_argument("--repeats", type=int, default=2, help="measure rows per tree")
    ap.add_argument("--row-seconds", type=float, default=90.0)
    args = ap.parse_args(argv)
    trees = dict(t.split("=", 1) for t in args.tree)
    graph = ["square", 8 if args.quick else 32]
    cache = os.environ.get("LAZYKERN_CACHE_DIR") or tempfile.mkdtemp(prefix="lk-config-")
    record: dict[str, Any] = header() | {"trees": trees, "rows": []}
    first = next(iter(trees))
    plan = [("warm", first), ("profile", first)]
    plan += [("measure", name) for _ in range(args.repeats) for name in trees]
    for mode, name in plan:
        spec = {"mode": mode, "tree": name, "graph": graph, "module": args.module}
        row = child(spec, trees[name], cache, args.row_seconds)
        record["rows"].append(row)
        brief = {k: row.get(k) for k in ("mode", "tree", "energy_seconds", "configuration_seconds", "ratio", "exact")}
        print(json.dumps(brief | ({"error": row["error"][-1500:]} if "error" in row else {})), flush=True)
        Path(args.out).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

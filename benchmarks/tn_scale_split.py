"""Issue 44's scale rows through the defaults, each with where its time goes.

    python3 benchmarks/tn_scale_split.py --out benchmarks/results/tn-scale-split-h100.json
    python3 benchmarks/tn_scale_split.py --quick --out /tmp/split.json     # small lattices

Rows (each a fresh process, ``module="cupy"``, +-J couplings from a shuffled edge list, no positions,
the public defaults): 32 x 32 energy with an empty store, then with the plan and kernels stored; one
32 x 32 ground-state configuration (``ground_state``, its energy checked); the 32 x 32 exact
ground-state count (same store: its counting kernels compile in its first pass); the count again
with its kernels stored; chimera 8 x 8 x 4 energy, killed after --chimera-seconds.

The split, measured inside the child by wrapping library functions (nothing in the library changes):

* ``compiles``: every kernel fetched or compiled, with its seconds and whether it compiled now;
* ``plan_seconds``: the public ``networks.plan`` call (order, sweep, slicing search);
* per contraction (each counting pass): wall seconds, its moduli (residues carried), and per algebra
  method (``bits``: the bit-addressed step, ``rows``: the strided row kernel, ``bmm``: the product of
  any shape, the untiled path; ``add``: slices summed; ``launch``: an energy's bit-addressed step over
  its boundary held in one buffer, lazykern/tn/_arena.py, whose size ``arena_bits`` gives; ``contiguous``
  and ``contiguous_parts``: layout copies, the bit-permuting kernels, wherever the executor makes them) calls, GPU
  seconds (CUDA events around the
  call on the launch stream) and host seconds; ``steps_host_seconds``: the executor's Python per step;
  ``gpu_idle_seconds``: the wall not covered by those methods' GPU time (host-bound stretches,
  compiles, transfers).
* the plan: slices, log2 of the largest intermediate, log10 multiply-adds, the cost model's
  predicted seconds and peak bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = r"""
import json, sys, time, math
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["bench_dir"])
t_import = time.perf_counter()
import numpy as np
if spec["module"] == "cupy":
    import cupy as cp
    xp = cp
else:  # a dry run on the host: the same bookkeeping, events that time nothing
    import types
    class _Event:
        def record(self): pass
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Event=_Event, get_elapsed_time=lambda a, b: 0.0,
        Device=lambda: types.SimpleNamespace(synchronize=lambda: None)), zeros=np.zeros)
    xp = np
from lazykern.families import family as famod
import importlib
from lazykern.tn import networks as nw, counting, _contract, _cost
N = importlib.import_module("lazykern.tn.contraction.network").Network
from lazykern.tn.counts import bounds as counts_bounds
from lazykern.tn.einsum import plan_steps
import spin_glass as bench
record = {"imports_seconds": round(time.perf_counter() - t_import, 3)}
progress = spec["progress"]

def save():
    with open(progress, "w") as f:
        json.dump(record, f)

compiles = []
_build = famod.KernelFamily._build
def build(self, frag, arch):
    t = time.perf_counter()
    k = _build(self, frag, arch)
    compiles.append([frag.name, round(time.perf_counter() - t, 4), bool(k.meta.get("compiled_now"))])
    return k
famod.KernelFamily._build = build

plans = []
_plan = nw.plan
def plan(*a, **k):
    t = time.perf_counter()
    p = _plan(*a, **k)
    plans.append(time.perf_counter() - t)
    sg = a[0]
    steps = plan_steps(sg.labels(), (), dict.fromkeys(range(sg.n), 2), p.path, p.sliced)
    rates = _cost.rates_for(False, 4)
    record["plan"] = {
        "seconds": round(plans[-1], 3), "slices": p.nslices, "log2_largest": round(math.log2(p.largest), 2),
        "log10_flops": round(math.log10(float(p.flops)), 3), "steps": len(p.path),
        "predicted_seconds_f32": round(_cost.seconds(steps, p.nslices, 4, rates), 3),
        "steps_over_2^28": sum(1 for s in steps if s.result >= 1 << 28),
    }
    save()
    return p
nw.plan = plan

calls = []  # (method, start event, end event, host seconds)
def timed(cls, name):
    orig = cls.__dict__[name]
    def wrapper(self, *a, **k):
        e0 = cp.cuda.Event(); e0.record()
        t = time.perf_counter()
        out = orig(self, *a, **k)
        host = time.perf_counter() - t
        e1 = cp.cuda.Event(); e1.record()
        calls.append((name, e0, e1, host))
        return out
    setattr(cls, name, wrapper)
for cls in (_contract.Algebra, counting.CountingAlgebra):
    for name in ("bmm", "rows", "bits", "add") + (("arena_step",) if cls is counting.CountingAlgebra else ()):
        if name in cls.__dict__:  # a count's steps over a boundary held in one buffer: arena_step
            timed(cls, name)
from lazykern.tn import _arena
timed(_arena, "launch")  # the energy's steps over a boundary held in one buffer
from lazykern.tn import _backend
for name in ("contiguous", "contiguous_parts"):  # layout copies (the bit-permuting kernels) outside the methods
    timed(_backend.Backend, name)
_use_arena = N.use_arena
def use_arena(self, plan):
    _use_arena(self, plan)
    record["arena_bits"] = None if self.alg.arena is None else self.alg.arena.bits
    record.setdefault("arena_bits_by_run", []).append(record["arena_bits"])  # a count: each pass's run
    save()
N.use_arena = use_arena

steps_host = [0.0, 0]
_step = N._step
def step(self, *a, **k):
    t = time.perf_counter()
    out = _step(self, *a, **k)
    steps_host[0] += time.perf_counter() - t
    steps_host[1] += 1
    return out
N._step = step

passes = []
def summary(wall, moduli):
    cp.cuda.Device().synchronize()
    by = {}
    for name, e0, e1, host in calls:
        row = by.setdefault(name, {"calls": 0, "gpu_seconds": 0.0, "host_seconds": 0.0})
        row["calls"] += 1
        row["gpu_seconds"] += cp.cuda.get_elapsed_time(e0, e1) / 1e3
        row["host_seconds"] += host
    gpu = sum(r["gpu_seconds"] for r in by.values())
    out = {"moduli": moduli, "residues": len(moduli), "seconds": round(wall, 3),
           "methods": {k: {kk: round(vv, 4) for kk, vv in v.items()} for k, v in by.items()},
           "steps": steps_host[1], "steps_host_seconds": round(steps_host[0], 3),
           "gpu_idle_seconds": round(wall - gpu, 3)}
    calls.clear(); steps_host[0] = 0.0; steps_host[1] = 0
    return out

if spec["kind"] == "degeneracy":
    _pass = counting.contract_network
    def one_pass(*a, **k):
        before = len(compiles)
        t = time.perf_counter()
        out = _pass(*a, **k)
        cp.cuda.Device().synchronize()
        row = summary(time.perf_counter() - t, list(k["algebra"].moduli))
        row["compile_seconds"] = round(sum(c[1] for c in compiles[before:] if c[2]), 3)
        passes.append(row)
        record["passes"] = passes
        save()
        return out
    counting.contract_network = one_pass
    _proven = counts_bounds.proven
    def proven(*a, **k):  # what the float64 pass proved: the bound's bits, the intervals' width, the roundings
        out = _proven(*a, **k)
        record["proven"] = None if out is None else {
            "top_bits": out.top.bit_length(), "span_bits": out.span.bit_length(),
            "intervals": out.lower is not None, "roundings": a[4]}
        return out
    counts_bounds.proven = proven  # where count_network looks it up
    from lazykern.tn import _shared
    _run_shared = _shared.run_shared
    def run_shared(*a, **k):  # the steps every pass shares, run once before the prime passes
        t = time.perf_counter()
        out = _run_shared(*a, **k)
        cp.cuda.Device().synchronize()
        record["shared"] = {"steps": sum(a[2].shared), "of": len(a[1].path), "passes_steps": len(a[2].path),
                            "seconds": round(time.perf_counter() - t, 3)}
        return out
    _shared.run_shared = run_shared
    # the count's wall outside its passes, by phase (each synchronized; nested phases overlap: the passes
    # run inside count_network, the float64 pass inside upper)
    import importlib as _il
    phases = record.setdefault("phases", {})
    def phase(module, name, label):
        orig = getattr(module, name)
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                cp.cuda.Device().synchronize()
                row = phases.setdefault(label, {"calls": 0, "seconds": 0.0})
                row["calls"] += 1
                row["seconds"] = round(row["seconds"] + time.perf_counter() - t, 4)
        setattr(module, name, wrapper)
    _sc = _il.import_module("lazykern.tn.spinglass.counts")
    _ps = _il.import_module("lazykern.tn.counts.passes")
    _ex = _il.import_module("lazykern.tn.counts.exact")
    _cr = _il.import_module("lazykern.tn._crt")
    for module, name, label in ((_sc, "route", "route"), (_sc, "fitted_network", "fitted_network"),
                                (_sc, "planned", "planned"), (_sc, "count_network", "count_network"),
                                (counting, "build_network", "build_network"), (_ps, "share", "share"),
                                (_ps, "residues_per_pass", "residues_per_pass"), (_ps, "int64_first", "int64_first"),
                                (counts_bounds, "float_counts", "float_counts"), (_ex, "count_bound", "count_bound"),
                                (_cr, "solve", "crt_solve")):
        phase(module, name, label)
else:
    _run = N.run
    def run(self, *a, **k):
        t = time.perf_counter()
        out = _run(self, *a, **k)
        cp.cuda.Device().synchronize()
        passes.append(summary(time.perf_counter() - t, []))
        record["passes"] = passes
        return out
    N.run = run

cp.zeros(1) + 1  # the context, outside the timed call
sg = bench.edge_list_instance(spec["graph"], shuffle=True, positions=False)
record["graph"] = spec["graph"]
save()
t = time.perf_counter()
if spec["kind"] == "energy":
    answer = nw.ground_state_energy(sg, module=xp, dtype=np.float32)
elif spec["kind"] == "configuration":
    E0, spins = nw.ground_state(sg, module=xp, dtype=np.float32)
    answer = [E0, float(sg.energy(spins))]  # the configuration's own energy must be E0
else:
    E0, count = nw.degeneracy(sg, module=xp, dtype=np.float32)
    answer = [E0, str(count), round(math.log2(count), 2) if count else None]
record["seconds"] = round(time.perf_counter() - t, 3)
record["answer"] = answer
record["outside_passes_seconds"] = round(record["seconds"] - sum(p["seconds"] for p in passes), 3)
record["compiles"] = compiles
record["compile_seconds"] = round(sum(c[1] for c in compiles if c[2]), 3)
save()
print(json.dumps(record))
"""


def child(spec: dict[str, Any], cache: str, timeout: float) -> dict[str, Any]:
    """One row in a fresh process with store ``cache``; on a timeout, what it had recorded by then."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        progress = f.name
    spec = spec | {"bench_dir": str(Path(__file__).resolve().parent), "progress": progress}
    env = dict(os.environ, LAZYKERN_CACHE_DIR=cache)
    start = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True, timeout=timeout, env=env
        )
        row = json.loads(out.stdout.splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-2000:]}
    except subprocess.TimeoutExpired:
        row = {"error": f"no answer within {timeout:g} s (the child was killed)"}
        try:
            row |= json.loads(Path(progress).read_text())
        except (OSError, ValueError):
            pass
    Path(progress).unlink(missing_ok=True)
    return spec | row | {"process_seconds": round(time.perf_counter() - start, 2)}


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in ("numpy", "cupy-cuda13x", "cupy-cuda12x", "numba-cuda", "cuda-core", "cotengra"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def header() -> dict[str, Any]:
    """A record's date, command, devices (nvidia-smi) and Python version (this script's and config_split's)."""
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
    except FileNotFoundError:
        smi = "no nvidia-smi"
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "device": smi,
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="8 x 8 and chimera 2 x 2 x 4")
    ap.add_argument(
        "--rows", nargs="*", default=["energy", "configuration", "degeneracy", "degeneracy-again", "chimera"]
    )
    ap.add_argument("--module", default="cupy", help="numpy: a dry run of the bookkeeping on the host")
    ap.add_argument("--chimera-seconds", type=float, default=60.0)
    ap.add_argument("--row-seconds", type=float, default=120.0)
    args = ap.parse_args(argv)
    L, ch = (8, [2, 2, 4]) if args.quick else (32, [8, 8, 4])
    cache = tempfile.mkdtemp(prefix="lk-split-")
    record: dict[str, Any] = header() | {"versions": versions(), "rows": []}
    t, c = args.row_seconds, args.chimera_seconds
    work = [
        (f"energy {L}x{L} empty store", "energy", {"kind": "energy", "graph": ["square", L]}, args.row_seconds),
        (f"energy {L}x{L} plan stored", "energy", {"kind": "energy", "graph": ["square", L]}, args.row_seconds),
        (f"configuration {L}x{L}", "configuration", {"kind": "configuration", "graph": ["square", L]}, t),
        (f"count {L}x{L}", "degeneracy", {"kind": "degeneracy", "graph": ["square", L]}, args.row_seconds),
        (f"count {L}x{L} kernels stored", "degeneracy-again", {"kind": "degeneracy", "graph": ["square", L]}, t),
        (f"chimera {'x'.join(map(str, ch))} energy", "chimera", {"kind": "energy", "graph": ["chimera", *ch]}, c),
    ]
    for name, group, spec, timeout in work:
        if group not in args.rows:
            continue
        record["rows"].append({"row": name} | child(spec | {"module": args.module}, cache, timeout))
        print(json.dumps(record["rows"][-1])[:3000], flush=True)
        Path(args.out).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

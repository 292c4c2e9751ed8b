"""Where a counting pass's host seconds go: the 32 x 32 +-J exact count with its kernels stored.

    python3 benchmarks/tn_count_host_profile.py --out benchmarks/results/tn-count-host-profile.json

Each row is a fresh process on one store (``LAZYKERN_CACHE_DIR``): first a warm-up count (compiles the
counting kernels), then the count again with per-pass wall seconds and, per pass, the host seconds of
``counts.algebra.launch_bits`` / ``count_bmm`` / ``Backend._whole`` / ``KernelFamily.get`` / every lazykern
launch (first call of each kernel name apart, with the kernel's local memory and registers), and one more
count under cProfile (top functions by total and by cumulative time). Options pick the rows.
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

CHILD = r"""
import cProfile, io, json, math, pstats, sys, time
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["bench_dir"])
import numpy as np
import cupy as cp
from lazykern.families import family as famod
from lazykern.launch import _launch
from lazykern.tn import networks as nw, counting, _backend
from lazykern.tn.counts import algebra as counts_algebra, launch as counts_launch
import spin_glass as bench

record = {"row": spec["row"]}
calls = {}  # name -> [calls, host seconds]
firsts = []  # (what, name, host seconds) of the first call of each name

def tally(what, name, seconds):
    key = f"{what}:{name}"
    row = calls.setdefault(key, [0, 0.0])
    if row[0] == 0:
        firsts.append([what, name, round(seconds, 5)])
    row[0] += 1
    row[1] += seconds

def wrap(owner, attr, what, name_of):
    orig = getattr(owner, attr)
    def wrapper(*a, **k):
        t = time.perf_counter()
        out = orig(*a, **k)
        tally(what, name_of(a, k, out), time.perf_counter() - t)
        return out
    setattr(owner, attr, wrapper)

if spec.get("split"):
    wrap(counts_algebra, "launch_bits", "launch_bits",
         lambda a, k, o: f"bits{len(a[4]['con'])}{len(a[4]['right_pos'])}x{len(a[1]) - 1}")
    wrap(counts_algebra, "count_bmm", "count_bmm", lambda a, k, o: "bmm")
    from lazykern.tn import _shared
    wrap(_shared, "run_shared", "run_shared", lambda a, k, o: f"{sum(a[2].shared)} steps")
    wrap(counts_launch, "launch_product", "bmm_launch", lambda a, k, o: "bmm")
    wrap(_backend.Backend, "_whole", "whole", lambda a, k, o: f"2^{int(math.log2(a[3]))}B")
    wrap(famod.KernelFamily, "get", "family_get", lambda a, k, o: o.name)
    orig_call = _launch.Launcher.__call__
    def call(self, *a):
        t = time.perf_counter()
        orig_call(self, *a)
        tally("launch", self.name, time.perf_counter() - t)
    _launch.Launcher.__call__ = call

passes = []
_pass = counting.contract_network
def one_pass(*a, **k):
    before = {key: list(v) for key, v in calls.items()}
    t = time.perf_counter()
    out = _pass(*a, **k)
    cp.cuda.Device().synchronize()
    row = {"moduli": list(k["algebra"].moduli), "seconds": round(time.perf_counter() - t, 3)}
    row["calls"] = {key: [v[0] - before.get(key, [0, 0.0])[0], round(v[1] - before.get(key, [0, 0.0])[1], 4)]
                    for key, v in calls.items() if v[0] != before.get(key, [0, 0.0])[0]}
    passes.append(row)
    return out
counting.contract_network = one_pass

cp.zeros(1) + 1
sg = bench.edge_list_instance(["square", spec["L"]], shuffle=True, positions=False)
prof = cProfile.Profile() if spec.get("profile") else None
t = time.perf_counter()
if prof is not None:
    prof.enable()
E0, count = nw.degeneracy(sg, module=cp, dtype=np.float32)
if prof is not None:
    prof.disable()
record["seconds"] = round(time.perf_counter() - t, 3)
record["answer"] = [E0, str(count)]
record["passes"] = passes
record["firsts"] = [f for f in firsts if f[2] > 0.002]
record["firsts_count"] = len(firsts)
if spec.get("split"):
    from lazykern.launch import _device
    attrs = {}
    for what, name, _ in firsts:
        if what != "launch" or not name.startswith("count"):
            continue
        try:
            a = counting.family.get(name, arch=_device.arch(0)).function().attributes
            attrs[name] = {k: int(getattr(a, k)()) for k in ("local_size_bytes", "num_regs", "max_threads_per_block")}
        except Exception as exc:  # a cuda.core without these attributes: say so, keep the row
            attrs[name] = repr(exc)[:200]
    record["kernel_attributes"] = attrs
if prof is not None:
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(45)
        record["profile_" + key] = s.getvalue().splitlines()[-60:]
print(json.dumps(record))
"""


def child(spec: dict[str, Any], cache: str, env_more: dict[str, str], timeout: float) -> dict[str, Any]:
    spec = spec | {"bench_dir": str(Path(__file__).resolve().parent)}
    env = dict(os.environ, LAZYKERN_CACHE_DIR=cache, **env_more)
    start = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True, timeout=timeout, env=env
        )
        row = json.loads(out.stdout.splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-3000:]}
    except subprocess.TimeoutExpired:
        row = {"error": f"no answer within {timeout:g} s"}
    return row | {"env": env_more, "process_seconds": round(time.perf_counter() - start, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--L", type=int, default=32)
    ap.add_argument("--rows", nargs="*", default=["warm", "split", "profile", "eager"])
    ap.add_argument("--timeout", type=float, default=100.0)
    ap.add_argument("--cache", help="a store to use (default: a new one)")
    args = ap.parse_args(argv)
    cache = args.cache or tempfile.mkdtemp(prefix="lk-prof-")
    record: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": " ".join(sys.argv), "rows": []}
    try:
        record["device"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip()
    except FileNotFoundError:
        record["device"] = "no nvidia-smi"
    work = {
        "warm": ({"row": "warm-up (compiles)"}, {}),
        "split": ({"row": "kernels stored, host split", "split": True}, {}),
        "profile": ({"row": "kernels stored, cProfile", "profile": True}, {}),
        "eager": ({"row": "kernels stored, CUDA_MODULE_LOADING=EAGER, host split", "split": True},
                  {"CUDA_MODULE_LOADING": "EAGER"}),
    }  # fmt: skip
    for name in args.rows:
        spec, env_more = work[name]
        row = child(spec | {"L": args.L}, cache, env_more, args.timeout)
        record["rows"].append(row)
        print(json.dumps(row)[:4000], flush=True)
        Path(args.out).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A sliced spin-glass contraction spread over 1, 2, ... GPUs of one host (``devices=``): time and speed-up.

    python3 benchmarks/slice_scaling.py --devices 1 2 all --out benchmarks/results/slice-scaling-2xh200.json
    python3 benchmarks/slice_scaling.py --quick --out /tmp/scaling.json      # 8 x 8, NumPy threads, a CPU

The +-J square lattice L x L (default 32) is planned once: the boundary sweep refined and sliced by
cotengra until its largest intermediate fits --memory-limit entries (default 2^28, so that there are
slices to spread; the plan is stored, a second run skips the search). Then its ground-state energy
is contracted with that plan for each --devices entry ("1" = GPU 0 alone, "2" = GPUs 0 and 1, "all"),
after one untimed contraction per entry (kernels loaded on every device). Each row: devices, seconds
(best of --repeats), energy, speed-up over the first entry; the record says whether every energy
agrees and, for the issue's targets, whether 2 GPUs reach 1.8x and 4 GPUs 3.5x.

Each row carries the spread's profile (the ``spread_profile`` debug records of ``lazykern.tn``, one
per contraction of the timed run: per device group its slices, wall seconds after the spread began
and thread CPU seconds; the combination's seconds). ``--optimize auto`` plans as the defaults do
(the boundary sweep, sliced only if it does not fit); ``--quantity count`` times ``degeneracy``
(exact counts: one contraction per counting pass, each spread).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import platform
import sys
import time
from typing import Any

import numpy as np

from lazykern.tn import networks as nw

TARGETS = {2: 1.8, 4: 3.5}  # issue 31: speed-up over one GPU


def devices_of(spec: str) -> Any:
    """ "all", or a count n meaning GPUs 0..n-1."""
    return "all" if spec == "all" else list(range(int(spec)))


class Profiles(logging.Handler):
    """Collects the spread profiles lazykern logs at debug level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        profile = getattr(record, "spread_profile", None)
        if profile is not None:
            self.seen.append(profile)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--L", type=int, default=32, help="lattice side")
    parser.add_argument("--devices", nargs="+", default=["1", "2", "all"], help='counts of GPUs, or "all"')
    parser.add_argument("--module", default="cupy", choices=["cupy", "torch", "numpy"])
    parser.add_argument("--memory-limit", type=int, default=2**28, help="entries of the largest intermediate")
    parser.add_argument("--plan-seconds", type=float, default=60.0, help="cotengra search time")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--optimize", default="cotengra", choices=["cotengra", "auto"])
    parser.add_argument("--quantity", default="energy", choices=["energy", "count"])
    parser.add_argument("--quick", action="store_true", help="8 x 8 lattice, NumPy, slices forced small (a CPU)")
    args = parser.parse_args()
    if args.quick:
        args.L, args.module, args.memory_limit, args.plan_seconds = 8, "numpy", 2**6, 2.0  # 16 slices
    module = np if args.module == "numpy" else __import__(args.module)
    dtype = np.float64 if module is np else np.float32
    sg = nw.square_lattice(args.L, seed=0)
    start = time.perf_counter()
    if args.optimize == "auto":
        plan = nw.plan(sg, module=module, dtype=dtype)
    else:
        limit, seconds = args.memory_limit, args.plan_seconds
        plan = nw.plan(sg, module=module, dtype=dtype, optimize="cotengra", memory_limit=limit, max_time=seconds)
    profiles = Profiles()
    logger = logging.getLogger("lazykern")
    logger.addHandler(profiles)
    logger.setLevel(logging.DEBUG)
    record: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "lattice": f"{args.L}x{args.L}",
        "module": args.module,
        "optimize": args.optimize,
        "quantity": args.quantity,
        "plan_seconds": round(time.perf_counter() - start, 2),
        "slices": plan.nslices,
        "log2_largest": round(math.log2(max(plan.largest, 1)), 2),
        "log10_flops": round(math.log10(max(plan.flops, 1)), 2),
        "rows": [],
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }

    def energy(devices: Any) -> Any:
        if args.quantity == "count":
            E, count = nw.degeneracy(sg, module=module, optimize=plan, devices=devices)
            return [E, str(count)]
        return nw.ground_state_energy(sg, module=module, dtype=dtype, optimize=plan, devices=devices)

    for spec in args.devices:
        devices = devices_of(spec)
        energy(devices)  # untimed: kernels loaded on every device, pools warm
        best, profile = math.inf, []
        for _ in range(args.repeats):
            profiles.seen = []
            t0 = time.perf_counter()
            E = energy(devices)
            took = time.perf_counter() - t0
            if took < best:
                best, profile = took, profiles.seen
        row = {"devices": spec, "seconds": round(best, 4), "energy": E, "profile": profile}
        base = record["rows"][0]["seconds"] if record["rows"] else best
        row["speedup"] = round(base / best, 3) if best > 0 else None
        record["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "profile"}), file=sys.stderr, flush=True)
        with open(args.out, "w") as fh:  # row by row: a run cut short keeps what it measured
            json.dump(record, fh, indent=2)
    record["energies_agree"] = len({json.dumps(r["energy"]) for r in record["rows"]}) == 1
    counts = {len(devices_of(r["devices"])) if r["devices"] != "all" else None: r for r in record["rows"]}
    record["targets"] = {f"{n} GPUs >= {x}x": counts[n]["speedup"] >= x for n, x in TARGETS.items() if n in counts}
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=2)
    return 0 if record["energies_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())

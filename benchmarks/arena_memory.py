"""The arena's memory model against the device: chimera 8 x 8 x 4's energy through the defaults, then what
CuPy's pool held against what lazykern/tn/_cost.py predicted.

    python3 benchmarks/arena_memory.py --out /tmp/arena-memory.json      # a GPU, CuPy

The pool keeps every block it was given until asked to hand them back, so after the run its total is its
high-water mark (less any blocks the executor's memory guard handed back before the run started). The
prediction is :func:`lazykern.tn._cost.arena_peak` of the plan the energy took, times the pool's margin (the
arena's block counted once, without it): the run must hold no more, and the free memory must cover it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spin_glass as bench  # noqa: E402

from lazykern.tn import networks as nw  # noqa: E402
from lazykern.tn.einsum import plan_steps  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    sg = bench.edge_list_instance(["chimera", 8, 8, 4], shuffle=True, positions=False)
    cp.zeros(1) + 1  # the context, outside the figures
    pool = cp.get_default_memory_pool()
    free = int(cp.cuda.runtime.memGetInfo()[0])
    start = time.perf_counter()
    energy = nw.ground_state_energy(sg, module=cp, dtype=np.float32)
    seconds = time.perf_counter() - start
    held = int(pool.total_bytes())
    plan = nw._plan(sg, module=cp, dtype=np.float32, arena=True)  # the plan it took (its sweeps are kept)
    steps = plan_steps(sg.labels(), (), dict.fromkeys(range(sg.n), 2), plan.path, plan.sliced)
    cost = importlib.import_module("lazykern.tn._cost")  # the model the executor plans with (the benchmark checks it)
    predicted = cost.arena_peak(steps, 4 * len(sg.edges) + 2 * sg.n, 4, plan.largest) * cost.POOL_MARGIN
    record = {
        "energy": energy,
        "seconds": round(seconds, 2),
        "slices": plan.nslices,
        "log2_largest": plan.largest.bit_length() - 1,
        "free_before_gib": round(free / 2**30, 3),
        "pool_held_gib": round(held / 2**30, 3),
        "predicted_with_margin_gib": round(predicted / 2**30, 3),
        "held_within_prediction": held <= predicted,
        "prediction_within_free": predicted <= free,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    Path(args.out).write_text(json.dumps(record, indent=1))
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())

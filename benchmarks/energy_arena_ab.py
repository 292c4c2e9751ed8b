"""The 32 x 32 energy with its boundary in one buffer (the arena's bit-addressed steps) against the row
kernel's sweep (its steps copy the boundary to the layout each needs), alternating in one process.

``lazykern.tn.contraction.network.ARENA_FASTER`` sets the line: "arena" runs with the library's value, "rows" with a
line no network reaches. Each mode: a first call (its kernels compiled, or read from the store) and
``--repeats`` warm calls; the modes alternate ``--rounds`` times. The instance is built the way users
build one (``spin_glass.edge_list_instance``: spins renumbered at random, no positions), ``module=cupy``,
defaults otherwise.

    python3 benchmarks/energy_arena_ab.py --out benchmarks/results/energy-arena-ab.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", nargs="+", default=["square", "32"], help="square L, or chimera m n t")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import cupy as xp
    import spin_glass as bench
    from foundation import environment

    from lazykern.tn import networks as nw

    E = importlib.import_module("lazykern.tn.contraction.network")  # where Network.use_arena reads the line
    line = E.ARENA_FASTER
    xp.zeros(1) + 1
    kind, *dims = args.graph
    sg = bench.edge_list_instance([kind, *map(int, dims)], shuffle=True, positions=False)
    record: dict = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "environment": environment(),
        "graph": sg.name,
        "arena_faster": line,
        "rounds": [],
    }
    for _ in range(args.rounds):
        for mode in ("rows", "arena"):
            E.ARENA_FASTER = line if mode == "arena" else 1 << 62
            seconds, energies = [], set()
            for _ in range(1 + args.repeats):
                start = time.perf_counter()
                energies.add(nw.ground_state_energy(sg, module=xp))
                seconds.append(round(time.perf_counter() - start, 3))
            xp.get_default_memory_pool().free_all_blocks()
            row = {"mode": mode, "energies": sorted(energies), "first": seconds[0], "warm": seconds[1:]}
            record["rounds"].append(row)
            print(json.dumps(row), flush=True)
    E.ARENA_FASTER = line
    warm = {
        m: statistics.median(s for r in record["rounds"] if r["mode"] == m for s in r["warm"])
        for m in ("rows", "arena")
    }
    record["warm_median"] = warm
    record["rows_over_arena"] = round(warm["rows"] / warm["arena"], 3)
    Path(args.out).write_text(json.dumps(record, indent=1))
    print(json.dumps({"warm_median": warm, "rows_over_arena": record["rows_over_arena"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where a spin glass's energy goes through the defaults: the host's share (planning, per-step Python)
against the device's, from cProfile over one ``ground_state_energy`` call in a fresh process.

The instance is built the way users build one (``spin_glass.edge_list_instance``: edges and couplings,
spins renumbered at random, no positions); ``module="cupy"``, default arguments otherwise. Prints one
JSON line: total seconds, the seconds of the top functions by cumulative and by own time.

    python3 benchmarks/energy_profile.py --graph square 32 --out energy-profile.json
    python3 benchmarks/energy_profile.py --graph square 32 --warm --out energy-profile.json   # a second call
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", nargs="+", default=["square", "32"], help="square L, or chimera m n t")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--warm", action="store_true", help="profile a second call (plan and kernels in place)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import cupy as xp
    import spin_glass as bench

    from lazykern.tn import networks as nw

    xp.zeros(1) + 1  # the CUDA context, as a user's script has it
    kind, *dims = args.graph
    sg = bench.edge_list_instance([kind, *map(int, dims)], shuffle=True, positions=False)
    first = None
    if args.warm:
        start = time.perf_counter()
        nw.ground_state_energy(sg, module=xp)
        first = round(time.perf_counter() - start, 3)
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    energy = nw.ground_state_energy(sg, module=xp)
    profile.disable()
    total = time.perf_counter() - start
    stats = pstats.Stats(profile)

    def top(key: int) -> list[list[object]]:
        rows = sorted(stats.stats.items(), key=lambda item: -item[1][key])[: args.top]  # type: ignore[attr-defined]
        return [[f"{Path(f).name}:{line}({name})", round(v[2], 3), round(v[3], 3), v[1]] for (f, line, name), v in rows]

    row = {
        "graph": sg.name,
        "energy": energy,
        "first_seconds": first,
        "seconds": round(total, 3),
        "cumulative": top(3),
        "own": top(2),
    }
    Path(args.out).write_text(json.dumps(row, indent=1))
    print(json.dumps(row)[:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Configurations as a tree (``ConfigsAll(tree_storage=True)``, GenericTensorNetworks' ``SumProductTree``):
seconds to build the tree of every independent set and to draw 1000 uniform samples from it, on
3-regular graphs of 70 vertices (GenericTensorNetworks' sum-product docs example) and 100 vertices
(``benchmarks/gtn.py``'s), a 12 x 12 grid (about 2^87 sets) and ConfigsMax(2) of the 100-vertex graph.
Medians of ``--repeats`` fresh draws (new seeds: each reaches tree states the last did not).

    python3 benchmarks/config_tree.py [--module cupy] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import networkx as nx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gtn  # noqa: E402

from lazykern.tn import problems as P  # noqa: E402
from lazykern.tn import properties as Q  # noqa: E402
from lazykern.tn import solve  # noqa: E402


def cases() -> dict[str, tuple[object, object]]:
    grid = nx.convert_node_labels_to_integers(nx.grid_2d_graph(12, 12))
    return {
        "regular70_all": (P.IndependentSet(nx.random_regular_graph(3, 70, seed=70)), Q.ConfigsAll(tree_storage=True)),
        "regular100_all": (P.IndependentSet(gtn.regular_graph(100)), Q.ConfigsAll(tree_storage=True)),
        "grid12_all": (P.IndependentSet(grid), Q.ConfigsAll(tree_storage=True)),
        "regular100_max2": (P.IndependentSet(gtn.regular_graph(100)), Q.ConfigsMax(2, tree_storage=True)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default="numpy")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    rows = {}
    for name, (problem, prop) in cases().items():
        builds, draws = [], []
        for r in range(args.repeats):
            start = time.perf_counter()
            found = solve(problem, prop, module=args.module)
            builds.append(time.perf_counter() - start)
            tree = found if not isinstance(found, list) else found[-1][1]
            start = time.perf_counter()
            sample = tree.sample(1000, seed=r)
            draws.append(time.perf_counter() - start)
            assert all(problem.is_feasible(c) for c in sample)
        rows[name] = {
            "count": str(tree.count),
            "log2_count": round(math.log2(tree.count), 2),
            "tree_s": round(statistics.median(builds), 3),
            "sample_1000_s": round(statistics.median(draws), 3),
        }
        print(name, rows[name], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"module": args.module, "repeats": args.repeats, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

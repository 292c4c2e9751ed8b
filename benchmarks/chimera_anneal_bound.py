"""An upper bound on chimera 8 x 8 x 4's ground-state energy that shares no code with the tensor networks.

    python3 benchmarks/chimera_anneal_bound.py --runs 200 --sweeps 20000 --out /tmp/anneal.json

Simulated annealing (single-spin Metropolis, inverse temperature swept geometrically from 0.1 to 6, Numba on
the CPU) on the instance ``tn_scale_split.py`` times: ``spin_glass.edge_list_instance(["chimera", 8, 8, 4],
shuffle=True, positions=False)``. Every run's energy is that of an explicit configuration (``SpinGlass.energy``),
so the lowest is an upper bound on E0: the exact energy the GPU row reports must be at most this, and equal to
it whenever annealing found a ground state.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spin_glass as bench  # noqa: E402


@numba.njit(cache=False)
def anneal(s, nb, nj, cnt, h, betas, seed):  # type: ignore[no-untyped-def]
    """Metropolis sweeps of ``s`` (+-1, changed in place) at each of ``betas``; E = -sum J s s - sum h s."""
    np.random.seed(seed)
    n = s.shape[0]
    for beta in betas:
        for _ in range(n):
            i = np.random.randint(n)
            local = h[i]
            for t in range(cnt[i]):
                local += nj[i, t] * s[nb[i, t]]
            dE = 2.0 * s[i] * local
            if dE <= 0 or np.random.random() < np.exp(-beta * dE):
                s[i] = -s[i]
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--sweeps", type=int, default=20000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    sg = bench.edge_list_instance(["chimera", 8, 8, 4], shuffle=True, positions=False)
    n = sg.n
    cnt = np.zeros(n, np.int64)
    for a, b in sg.edges:
        cnt[a] += 1
        cnt[b] += 1
    nb = np.full((n, int(cnt.max())), -1, np.int64)
    nj = np.zeros(nb.shape)
    cnt[:] = 0
    for (a, b), j in zip(sg.edges, sg.J):
        for u, v in ((a, b), (b, a)):
            nb[u, cnt[u]], nj[u, cnt[u]] = v, j
            cnt[u] += 1
    h = np.zeros(n) if sg.h is None else np.asarray(sg.h, float)
    rng = np.random.default_rng(0)
    betas = np.geomspace(0.1, 6.0, args.sweeps)
    energies = []
    start = time.perf_counter()
    for run in range(args.runs):
        s = anneal(rng.choice([-1, 1], n).astype(np.int64), nb, nj, cnt, h, betas, run)
        energies.append(float(sg.energy(s)))  # the library's own energy of an explicit configuration
    found = Counter(energies)
    record = {
        "instance": "chimera 8x8x4 edge list shuffled, no positions (spin_glass.edge_list_instance)",
        "runs": args.runs,
        "sweeps": args.sweeps,
        "best": min(energies),
        "hits": {str(k): v for k, v in sorted(found.items())},
        "seconds": round(time.perf_counter() - start, 1),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    Path(args.out).write_text(json.dumps(record, indent=1))
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())

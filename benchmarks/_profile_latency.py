"""Where the first 8 x 8 energy of a fresh process goes (cProfile), after imports and the CUDA context.

    python3 benchmarks/_profile_latency.py   # run it twice: the second finds plans and kernels in the store

The lattice is a user's edge list (spins renumbered at random, no positions) solved with defaults on CuPy.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time

import cupy as xp
import numba.cuda
import numpy as np

from lazykern.tn import networks as nw


def main() -> None:
    xp.zeros(1) + 1
    numba.cuda.current_context()
    lattice = nw.square_lattice(8, seed=8)
    perm = np.random.default_rng(1).permutation(lattice.n)
    sg = nw.SpinGlass(lattice.n, perm[lattice.edges], lattice.J, lattice.h, None, "8x8 edge list")  # type: ignore[arg-type]
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    energy = nw.ground_state_energy(sg, module=xp)
    profile.disable()
    first = time.perf_counter() - start
    start = time.perf_counter()
    nw.ground_state_energy(sg, module=xp)
    again = time.perf_counter() - start
    loaded = [m for m in ("cotengra", "kahypar", "opt_einsum") if m in sys.modules]
    print(f"first {first:.4f} s, again {again:.4f} s, energy {energy}, planners imported {loaded}")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumtime").print_stats(40)
    print(text.getvalue())


if __name__ == "__main__":
    main()

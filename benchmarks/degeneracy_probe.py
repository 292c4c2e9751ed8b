"""Degeneracy through the defaults on the GPU, pass by pass: where a 32x32 count's time goes.

Each lattice is built the way users build one (``spin_glass.edge_list_instance``: the lattice's edges
and couplings, spins renumbered at random, no positions), solved with ``ground_state_energy`` and then
``degeneracy`` (defaults, module=cupy); every whole counting contraction (one modulus set) is timed.
A 16x16 count is compared with the NumPy path's count (exact integers both). With ``--split`` the
count runs once more with every counting product timed on the device by kind ("bits": the
bit-addressed step, "bits in place", "rows": the strided row kernel, "any": the product of any shape
behind a layout copy), so the row says where the plan's time goes; the plan's slices and largest
intermediate, the residues each pass carried and its seconds are in every row.

    python3 benchmarks/degeneracy_probe.py --sizes 16 24 32 --split 32 --out degeneracy.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 24, 32])
    parser.add_argument("--check", type=int, default=16, help="size whose GPU count is compared with NumPy's")
    parser.add_argument("--split", type=int, nargs="*", default=[], help="sizes whose count is profiled by kernel")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import cupy as xp
    import spin_glass as bench

    from lazykern.tn import counting
    from lazykern.tn import networks as nw

    passes: list[list[object]] = []
    one_pass = counting.contract_network

    def timed(*a: object, **k: object) -> object:
        t0 = time.perf_counter()
        out = one_pass(*a, **k)
        xp.cuda.Device().synchronize()
        passes.append([list(getattr(k.get("algebra"), "moduli", ())), round(time.perf_counter() - t0, 3)])
        return out

    counting.contract_network = timed
    rows = []
    for L in args.sizes:
        sg = bench.edge_list_instance(["square", L], shuffle=True, positions=False)
        t0 = time.perf_counter()
        energy = nw.ground_state_energy(sg, module=xp)
        t_energy = time.perf_counter() - t0
        passes.clear()
        t0 = time.perf_counter()
        try:
            e_count, count = nw.degeneracy(sg, module=xp)
        except Exception as exc:  # recorded with the pool's state; the next size still runs
            pool = xp.get_default_memory_pool()
            rows.append(dict(L=L, energy=energy, passes=list(passes), error=f"{type(exc).__name__}: {exc}"[:1500],
                             pool_total=pool.total_bytes(), pool_used=pool.used_bytes()))  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
            Path(args.out).write_text(json.dumps(dict(command=" ".join(sys.argv), rows=rows), indent=1))
            continue
        t_count = time.perf_counter() - t0
        row = dict(
            L=L,
            energy=energy,
            energy_seconds=round(t_energy, 3),
            count_energy=e_count,
            count=str(count),
            log2_count=round(math.log2(count), 2) if count else None,
            degeneracy_seconds=round(t_count, 3),
            ratio=round(t_count / t_energy, 2),
            passes=list(passes),
        )
        plan = nw.plan(sg, module=xp, count_dtype=np.int64)  # the plan degeneracy used (memoized sweep)
        row |= dict(slices=plan.nslices, log2_largest=round(math.log2(plan.largest), 2))
        if L in args.split:
            row["split"] = split(lambda sg=sg: nw.degeneracy(sg, module=xp), xp)
        if L == args.check:
            row["numpy_count"] = str(nw.degeneracy(sg)[1])
            row["equal"] = row["numpy_count"] == row["count"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        Path(args.out).write_text(json.dumps(dict(command=" ".join(sys.argv), rows=rows), indent=1))
    return 0


def split(count: object, xp: object) -> dict[str, object]:
    """One more count with each counting product synchronized and timed, by kind of kernel."""
    from lazykern.tn import counting

    kinds: dict[str, list[float]] = {}
    alg = counting.CountingAlgebra
    real = {"bits": alg.bits, "rows": alg.rows, "bmm": alg.bmm}

    def timed(kind: str, name: str) -> object:
        def run(self: object, *a: object) -> object:
            xp.cuda.Device().synchronize()  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            out = real[name](self, *a)
            xp.cuda.Device().synchronize()  # type: ignore[attr-defined]
            label = kind if name != "bits" else ("bits in place" if a[-1] else "bits")
            entry = kinds.setdefault(label, [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - t0
            return out

        return run

    for kind, name in (("bits", "bits"), ("rows", "rows"), ("any", "bmm")):
        setattr(alg, name, timed(kind, name))
    try:
        t0 = time.perf_counter()
        count()  # type: ignore[operator]
        total = time.perf_counter() - t0
    finally:
        for name, fn in real.items():
            setattr(alg, name, fn)
    products = {k: {"calls": n, "seconds": round(t, 3)} for k, (n, t) in kinds.items()}
    return {"seconds": round(total, 3), "products": products}


if __name__ == "__main__":
    raise SystemExit(main())

"""The bit-addressed counting step (``lk_count_bits``) alone: GB/s by where the summed spins lie.

    python3 benchmarks/count_bits_kernel.py --out /tmp/bits.json [--old OLD_COUNTING_CU] [--log2 30]

One in-place step of a 2^log2-entry boundary (float32 values, R int32 residues), K = N = 8 (three spins
summed out, three brought in, one batch spin: the 32 x 32 sweep's count_bits33), its summed and batch
spins at the lowest address bits, the highest, or spread; ``--ones``: Y's counts all 1. With ``--old``,
the same fragment compiled against another counting.cu (an earlier commit's) runs on the same arrays:
its results must be equal (written into a second array) and its time is reported beside.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from importlib import resources
from pathlib import Path

import numpy as np

LAYOUTS = {"low": ([3, 2, 1], [0]), "spread": ([17, 9, 4], [12]), "high": ([-2, -3, -4], [-1])}
PRIMES = (2147483647, 2147483629, 2147483587, 2147483579)


def _kernels(old: str | None, residues: int) -> dict[str, object]:
    from lazykern.families.family import KernelFamily
    from lazykern.tn import counting
    from lazykern.tn.counts import kernels as count_kernels

    name = counting.kernel_name("maxplus", np.dtype("float32"), np.dtype("int32"), rows="bits33", residues=residues)
    code, signature = count_kernels._bits_fragment(name)
    sources = {"new": resources.files("lazykern.tn").joinpath("counting.cu").read_text(encoding="utf-8")}
    if old:
        sources["old"] = Path(old).read_text(encoding="utf-8")
    kernels = {}
    for tag, preamble in sources.items():
        fam = KernelFamily(f"count_bits_bench_{tag}", preamble, options=("-std=c++17",))
        fam.add(name, code, signature=signature)
        kernels[tag] = fam.get(name, arch="sm_90")
    return kernels


def _pointers(arrays: list) -> list[int]:
    """A kernel's four count pointers: the R arrays' and the first again (the kernel reads only R)."""
    return [a.data.ptr for a in arrays] + [arrays[0].data.ptr] * (4 - len(arrays))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--old", help="an earlier counting.cu to compare with")
    ap.add_argument("--log2", type=int, default=30)
    ap.add_argument("--residues", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ones", action="store_true", help="Y's counts all 1 (a sweep's new spins)")
    args = ap.parse_args()
    import cupy as cp

    kernels = _kernels(args.old, args.residues)
    n, R = args.log2, args.residues
    rng = cp.random.default_rng(1)
    xv = rng.integers(-2, 3, 1 << n, dtype=cp.int32).astype(cp.float32)
    xc = [rng.integers(0, p, 1 << n, dtype=cp.int64).astype(cp.int32) for p in PRIMES[:R]]
    yv = rng.integers(-2, 3, 2 * 64, dtype=cp.int32).astype(cp.float32)
    yc = [rng.integers(0, p, 2 * 64, dtype=cp.int64).astype(cp.int32) for p in PRIMES[:R]]
    if args.ones:
        yc = [cp.ones_like(c) for c in yc]
    outs = {tag: (cp.empty_like(xv), [cp.empty_like(c) for c in xc]) for tag in kernels}
    record = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "log2_entries": n, "residues": R, "layouts": {}}
    record["y_counts_ones"] = args.ones
    record["device"] = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    moved = 2 * (1 << n) * (4 + 4 * R)  # every entry read and written once
    for layout, (con, batch) in LAYOUTS.items():
        con, batch = [p % n for p in con], [p % n for p in batch]
        mask = np.uint64(sum(1 << p for p in con + batch))
        packed = [np.uint64(sum(p << (8 * t) for t, p in enumerate(ps))) for ps in (con, batch, batch, con)]
        rows = 1 << (n - len(con) - len(batch))
        row = {}
        grid = ((min(-(-rows // 256), 132 * 32),), (256,), 0)
        mods = [np.uint64(p) for p in (*PRIMES[:R], *[0] * (4 - R))]
        for tag, kernel in kernels.items():
            cv, cc = outs[tag]
            call = [xv.data.ptr, yv.data.ptr, cv.data.ptr, *_pointers(xc), *_pointers(yc), *_pointers(cc)]
            call += [rows, len(batch), mask, mask, *packed, *mods]

            def launch(kernel=kernel, call=call):
                kernel[grid](*call)  # noqa: B023 (grid: this layout's, the loop's own)

            launch()
            cp.cuda.Device().synchronize()
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(args.reps):
                launch()
            end.record()
            end.synchronize()
            seconds = cp.cuda.get_elapsed_time(start, end) / 1e3 / args.reps
            row[tag] = {"ms": round(seconds * 1e3, 3), "GB_per_s": round(moved / seconds / 1e9, 1)}
        if "old" in outs:
            row["equal"] = bool(cp.array_equal(outs["old"][0], outs["new"][0])) and all(
                bool(cp.array_equal(a, b)) for a, b in zip(outs["old"][1], outs["new"][1])
            )
        record["layouts"][layout] = {"con_bits": con, "batch_bits": batch} | row
        print(layout, row, flush=True)
    Path(args.out).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

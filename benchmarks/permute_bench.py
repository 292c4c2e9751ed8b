"""The bit-permutation copy on a GPU: the plain kernel against the tiled one, beside CuPy's copy and the
device's own copy rate (a contiguous device-to-device copy: the hardware limit for reading and writing).

Each case copies a permuted view of a binary tensor (2^n entries) into C order; the rate counts the bytes
read plus the bytes written, so it compares directly with the contiguous copy. Medians of ``--repeats``
CUDA-event timings, every variant measured side by side in one process. An internal kernel's
microbenchmark: it reaches ``lazykern.tn._permute`` and ``_backend`` through importlib (as
benchmarks/kbest_hoststep_cpu.py does) and judges no target; the contraction's figures that targets
are judged by come from the public API (benchmarks/gtn.py).

    python3 benchmarks/permute_bench.py --out results.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time

import numpy as np


def _time(cupy, fn, repeats: int) -> float:
    fn()
    cupy.cuda.Device().synchronize()
    out = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    import cupy

    _permute = importlib.import_module("lazykern.tn._permute")
    be = importlib.import_module("lazykern.tn._backend").Backend("cupy", cupy)
    rng = np.random.default_rng(0)
    real = _permute.tiling
    rows = []
    for n, dtype, parts, kind in (
        (28, "float32", 1, "reversed"),
        (28, "float32", 1, "random"),
        (27, "int64", 1, "random"),
        (28, "float32", 1, "contracted last"),
        (24, "float32", 2, "random"),
        (24, "int64", 4, "random"),
    ):
        if kind == "reversed":
            perm = tuple(range(n))[::-1]
        elif kind == "random":
            perm = tuple(int(a) for a in rng.permutation(n))
        else:  # a step operand: its 10 leading (contracted) axes moved last, the rest in order
            perm = tuple(range(10, n)) + tuple(range(10))
        xs = [cupy.arange(1 << n, dtype=dtype).reshape((2,) * n) for _ in range(parts)]
        views = tuple(x.transpose(perm) for x in xs)
        want = cupy.ascontiguousarray(views[0])
        nbytes = 2 * parts * xs[0].nbytes
        row = {"n": n, "dtype": dtype, "parts": parts, "perm": kind}

        def run(views=views):
            return be.contiguous_parts(views) if len(views) > 1 else (be.contiguous(views[0]),)

        _permute.tiling = lambda bits: None  # the plain kernel
        plain = _time(cupy, run, args.repeats)
        _permute.tiling = real
        assert bool((run()[0] == want).all()), row
        tiled = _time(cupy, run, args.repeats)
        library = _time(cupy, lambda views=views: [cupy.ascontiguousarray(v) for v in views], args.repeats)
        flat = xs[0].reshape(-1)
        memcpy = _time(cupy, lambda flat=flat, parts=parts: [flat.copy() for _ in range(parts)], args.repeats)
        row.update(
            plain_s=plain,
            tiled_s=tiled,
            cupy_s=library,
            memcpy_s=memcpy,
            plain_gbs=nbytes / plain / 1e9,
            tiled_gbs=nbytes / tiled / 1e9,
            cupy_gbs=nbytes / library / 1e9,
            memcpy_gbs=nbytes / memcpy / 1e9,
            tiled_over_plain=plain / tiled,
            tiled_share_of_memcpy=memcpy / tiled,
        )
        print(json.dumps(row), flush=True)
        rows.append(row)
        del xs, views, want
        cupy.get_default_memory_pool().free_all_blocks()
    props = cupy.cuda.runtime.getDeviceProperties(0)
    with open(args.out, "w") as fh:
        json.dump(
            {
                "device": props["name"].decode(),
                "driver": cupy.cuda.runtime.driverGetVersion(),
                "date": time.strftime("%Y-%m-%d"),
                "command": "python3 benchmarks/permute_bench.py --out ...",
                "rows": rows,
            },
            fh,
            indent=1,
        )


if __name__ == "__main__":
    main()

"""The bit-permutation copy on a GPU: the plain kernel against the tiled one, each with its rounds as
shipped (``_permute.ROUNDS``: several entries or tiles a round, their loads issued together), one at a
time (``ONE_BY_ONE``) and half the shipped, and with ``--baseline`` an earlier module's kernels, beside
CuPy's copy and the device's own copy rate (``cudaMemcpyAsync`` device to device: the hardware limit for
reading and writing).

Each case copies a permuted view of a binary tensor (2^n entries) into C order; the rate counts the bytes
read plus the bytes written, so it compares directly with the contiguous copy. Medians of ``--repeats``
CUDA-event timings, every variant measured side by side in one process. An internal kernel's
microbenchmark: it reaches ``lazykern.tn._permute`` and ``_backend`` through importlib (as
benchmarks/kbest_hoststep_cpu.py does) and judges no target; the contraction's figures that targets
are judged by come from the public API (benchmarks/gtn.py).

    python3 benchmarks/permute_bench.py --out results.json [--baseline old_permute.py]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
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


def _interleaved(cupy, fns: dict, repeats: int) -> dict:
    """Median seconds of each of ``fns`` (name -> (setup, call)), the variants taken in turn each repeat."""
    times: dict = {k: [] for k in fns}
    for setup, fn in fns.values():
        setup()
        fn()
    cupy.cuda.Device().synchronize()
    for _ in range(repeats):
        for name, (setup, fn) in fns.items():
            setup()
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times[name].append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--baseline", help="an earlier lazykern/tn/_permute.py (git show REV:...): its kernels as 'base'")
    args = ap.parse_args()
    import cupy

    _permute = importlib.import_module("lazykern.tn._permute")
    be = importlib.import_module("lazykern.tn._backend").Backend("cupy", cupy)
    rng = np.random.default_rng(0)
    real = _permute.tiling
    # the kernels' rounds: one entry (plain) or one tile (tiled) at a time; the shipped ROUNDS; half as many
    # (twice as many tiles would pass the 48 KiB of static shared memory a block may declare)
    variants = {
        "one": _permute.ONE_BY_ONE,
        "shipped": _permute.ROUNDS,
        "half": _permute.Rounds(plain=4, tiles={4: 4, 8: 2}),
    }
    families = {k: _permute.make_family(rounds=r, family_name=f"tn_permute_bench_{k}") for k, r in variants.items()}
    if args.baseline:
        spec = importlib.util.spec_from_file_location("lazykern.tn._permute_baseline", args.baseline)
        base = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(base)
        families["base"] = base.make_family()
        variants["base"] = None

    def use(name: str, tiled: bool):
        def setup() -> None:
            _permute._family = families[name]
            _permute._kernels.clear()
            _permute.tiling = real if tiled else (lambda bits: None)

        return setup

    rows = []
    for n, dtype, parts, kind in (
        (28, "float32", 1, "reversed"),
        (28, "float32", 1, "random"),
        (27, "int64", 1, "random"),
        (28, "float32", 1, "contracted last"),
        (28, "float32", 1, "low bits kept"),
        (24, "float32", 2, "random"),
        (24, "int64", 4, "random"),
    ):
        if kind == "reversed":
            perm = tuple(range(n))[::-1]
        elif kind == "random":
            perm = tuple(int(a) for a in rng.permutation(n))
        elif kind == "low bits kept":  # the plain kernel's own case: the 6 last axes stay last
            perm = tuple(int(a) for a in rng.permutation(n - 6)) + tuple(range(n - 6, n))
        else:  # a step operand: its 10 leading (contracted) axes moved last, the rest in order
            perm = tuple(range(10, n)) + tuple(range(10))
        xs = [cupy.arange(1 << n, dtype=dtype).reshape((2,) * n) for _ in range(parts)]
        views = tuple(x.transpose(perm) for x in xs)
        want = cupy.ascontiguousarray(views[0])
        nbytes = 2 * parts * xs[0].nbytes
        row = {"n": n, "dtype": dtype, "parts": parts, "perm": kind}

        def run(views=views):
            return be.contiguous_parts(views) if len(views) > 1 else (be.contiguous(views[0]),)

        for name in variants:
            for tiled in (False, True):
                use(name, tiled)()
                assert bool((run()[0] == want).all()), (row, name, tiled)
        routes = {"plain": False, "tiled": True}
        fns = {f"{name}_{r}": (use(name, tiled), run) for name in variants for r, tiled in routes.items()}
        seconds = _interleaved(cupy, fns, args.repeats)
        use("shipped", True)()
        flat = xs[0].reshape(-1)
        dst = cupy.empty_like(flat)

        def memcpy(flat=flat, dst=dst, parts=parts):
            for _ in range(parts):
                cupy.cuda.runtime.memcpyAsync(dst.data.ptr, flat.data.ptr, flat.nbytes, 3, 0)  # device to device

        library = _time(cupy, lambda views=views: [cupy.ascontiguousarray(v) for v in views], args.repeats)
        d2d = _time(cupy, memcpy, args.repeats)
        row.update({f"{k}_gbs": round(nbytes / v / 1e9, 1) for k, v in seconds.items()})
        row.update(cupy_gbs=round(nbytes / library / 1e9, 1), d2d_gbs=round(nbytes / d2d / 1e9, 1))
        best = "tiled" if _permute_tile_used(_permute, xs[0], perm) else "plain"
        row["route"] = best  # what the copy takes (tiled where the plain kernel's reads would not coalesce)
        row["shipped_over_one"] = round(seconds[f"one_{best}"] / seconds[f"shipped_{best}"], 3)
        row["shipped_over_half"] = round(seconds[f"half_{best}"] / seconds[f"shipped_{best}"], 3)
        if "base" in families:
            row["shipped_over_base"] = round(seconds[f"base_{best}"] / seconds[f"shipped_{best}"], 3)
        print(json.dumps(row), flush=True)
        rows.append(row)
        del xs, views, want, flat, dst
        cupy.get_default_memory_pool().free_all_blocks()
    props = cupy.cuda.runtime.getDeviceProperties(0)
    with open(args.out, "w") as fh:
        json.dump(
            {
                "device": props["name"].decode(),
                "driver": cupy.cuda.runtime.driverGetVersion(),
                "date": time.strftime("%Y-%m-%d"),
                "command": "python3 benchmarks/permute_bench.py --out ...",
                "rates": "GB/s, bytes read plus written; medians of --repeats, variants interleaved each repeat",
                "rows": rows,
            },
            fh,
            indent=1,
        )


def _permute_tile_used(_permute, x, perm) -> bool:
    """Whether the shipped copy of ``x.transpose(perm)`` takes the tiled kernel."""
    view = x.transpose(perm)
    bits = _permute.bit_strides(view.shape, tuple(st // view.itemsize for st in view.strides))
    return bits is not None and _permute.tiling(bits) is not None


if __name__ == "__main__":
    main()

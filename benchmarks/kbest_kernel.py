"""The k-best product kernels alone on the large steps of CountingMax(2) (issue 47): one thread per output
(``lk_kbest_bmm``) against the tiled kernel (``lk_kbest_tiled``), same operands, same process.

    python3 benchmarks/kbest_kernel.py --out benchmarks/results/kbest-kernel.json

Shapes (batch, M, K, N) are the largest k-best steps recorded by ``gtn_profile.py --counting`` for the
random 3-regular n = 200 graph (the batch of the two largest cut to 256; f32 values, A and B contiguous
as the contraction lays them out). Each
kernel is warmed (compiled, loaded) first, then timed over ``--reps`` launches between two device
synchronizations; the results of the two kernels are compared entry for entry (values and counts), and
``tps`` is multiply-adds (batch M N K) per second, beside the f32 max-plus GEMM rate measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# batch cut to 256 where the recorded step's operands or result pass 2^27 entries (k-best parts: 40 bytes each)
SHAPES = [(256, 4096, 16, 128), (256, 128, 2048, 8), (4, 8192, 64, 1024), (2, 16384, 8, 2048), (2, 8192, 8, 128)]
# session 62's largest step of CountingMax(2), n = 200 (128, 32768, 64, 128), its batch cut to 16
SHAPES.append((16, 32768, 64, 128))
# session 72's largest k-best steps of CountingMax(2), n = 200 (benchmarks/results/s72-h200, call 3): 44.5,
# 28.6, 8.7 and 3.8 ms of its 104 ms of steps
CURRENT = [(128, 32768, 64, 128), (64, 2048, 4096, 16), (512, 16384, 16, 32), (64, 512, 16, 4096)]
P = 2147483647


def operand(cupy: Any, shape: tuple[int, int, int], k: int, ring: str, seed: int) -> tuple[Any, ...]:
    """k-best parts of ``shape``: the best value in -8..7, each next one 1 to 3 below it (sizes of
    independent sets: small integers with many equal sums), counts below 2^30 (their residues)."""
    rng = cupy.random.default_rng(seed)
    values = [rng.integers(-8, 8, shape).astype(cupy.float32)]
    for _ in range(k - 1):
        values.append(values[-1] - rng.integers(1, 4, shape).astype(cupy.float32))
    counts = [rng.integers(1, 1 << 30, shape, dtype=cupy.int64) for _ in range(k)]
    if ring == "v":
        return tuple(values)
    if ring[0] == "f":  # f8, f4
        return tuple(values) + tuple(c.astype(f"f{ring[1]}") for c in counts)
    if ring == "p":
        return tuple(values) + tuple(counts) + tuple(c % P for c in counts)
    return tuple(values) + tuple(counts)


def measure(fn: Any, cupy: Any, reps: int) -> float:
    fn()
    cupy.cuda.runtime.deviceSynchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    return (time.perf_counter() - start) / reps


def compare(alg: Any, A: tuple[Any, ...], B: tuple[Any, ...], reps: int = 3, tiles: str = "") -> dict[str, Any]:
    """The step alone through the tiled kernel and through one thread per output: seconds, equal results;
    with ``tiles`` (comma-separated names of ``_kbest_kernels.TILES``), each of those forced in turn too
    (``tile_<name>_s``, ``tile_<name>_equal``; ``kbest.TILED`` set to it)."""
    import cupy

    from lazykern.tn.algebras import kbest

    batch, M, K = (int(x) for x in A[0].shape)
    row: dict[str, Any] = {"tile": kbest.tiling(batch, M, int(B[0].shape[2]), K)}
    tiled, _ = alg.bmm(A, B, False)
    row["tiled_s"] = measure(lambda: alg.bmm(A, B, False), cupy, reps)
    kbest.TILED = False
    try:
        untiled, _ = alg.bmm(A, B, False)
        row["untiled_s"] = measure(lambda: alg.bmm(A, B, False), cupy, reps)
    finally:
        kbest.TILED = True
    row["equal"] = all(bool(cupy.array_equal(t, u)) for t, u in zip(tiled, untiled, strict=True))
    row["speedup"] = round(row["untiled_s"] / row["tiled_s"], 2)
    for name in [t for t in tiles.split(",") if t]:
        kbest.TILED = name  # every step through that tile
        try:
            forced, _ = alg.bmm(A, B, False)
            row[f"tile_{name}_s"] = measure(lambda: alg.bmm(A, B, False), cupy, reps)
        finally:
            kbest.TILED = True
        row[f"tile_{name}_equal"] = all(bool(cupy.array_equal(t, u)) for t, u in zip(forced, untiled, strict=True))
        del forced
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rings", default="p,i64", help="comma-separated: p (paired), i64, m, f8, f4 (floats), v")
    parser.add_argument("--tiles", default="", help="comma-separated tile names each shape is also forced through")
    parser.add_argument("--current", action="store_true", help="session 72's largest steps, not the earlier list")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import cupy

    from lazykern.tn.algebras import kbest
    from lazykern.tn.einsum import backend_of
    from lazykern.tools.bench.device import environment

    be, _ = backend_of(cupy.zeros(1))
    record: dict[str, Any] = environment(argv) | {"rows": []}
    try:
        from benchmarks.spin_glass import gemm_rate

        record["gemm"] = gemm_rate(cupy, 4096)
    except Exception as exc:  # the kernels' rows still run
        record["gemm"] = {"error": repr(exc)}
    print("gemm", json.dumps(record["gemm"]), flush=True)
    k = 2
    for ring in args.rings.split(","):
        if ring == "p":
            alg = kbest.paired_algebra(k, P)("maxplus", be)
        else:
            floats = int(ring[1]) if ring[0] == "f" else 0
            alg = kbest.algebra(k, ring != "v", P if ring == "m" else 0, floats=floats)("maxplus", be)
        for batch, M, K, N in CURRENT if args.current else SHAPES:
            A, B = operand(cupy, (batch, M, K), k, ring, 1), operand(cupy, (batch, K, N), k, ring, 2)
            row = compare(alg, A, B, args.reps, args.tiles)
            del A, B
            row = {"ring": ring, "k": k, "shape": [batch, M, K, N], "macs": batch * M * N * K} | row
            for key in ("tiled", "untiled"):
                row[f"{key}_tps"] = round(row["macs"] / row[f"{key}_s"] / 1e12, 4)
            if isinstance(record["gemm"], dict) and record["gemm"].get("tps"):
                row["tiled_gemm_ratio"] = round(row["tiled_tps"] / record["gemm"]["tps"], 4)
            cupy.get_default_memory_pool().free_all_blocks()
            record["rows"].append(row)
            print(json.dumps(row), flush=True)
            Path(args.out).write_text(json.dumps(record, indent=1, default=str))
    return 0 if all(v for r in record["rows"] for key, v in r.items() if key.endswith("equal")) else 1


if __name__ == "__main__":
    sys.exit(main())

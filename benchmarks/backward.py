"""Tropical backward on the GPU: the shared-memory kernels vs the per-element atomic kernel, side by side.

    python3 benchmarks/backward.py --out backward.json

For each shape, ``tropical.matmul_backward`` from a real forward argmax into
preallocated ``out=`` gradients, timed with CUDA events (median of --repeats),
once with the library's plan (``plan.backward_plan``: shared-memory sums, stored
once) and once forced onto the per-element atomic kernel (groups 0, the library
before). GB/s counts the least a backward must move: read grad_C and the argmax,
write both gradients. Both answers are compared.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import statistics
import sys
from typing import Any

import numpy as np

from lazykern.tropical import plan

SHAPES = [  # (batch or None, M, K, N, dtype)
    (None, 4096, 4096, 4096, "float32"),
    (None, 4096, 4096, 4096, "float64"),
    (None, 8192, 8192, 8192, "float32"),
    (None, 1024, 1024, 1024, "float32"),
    (None, 2**21, 4, 4, "float32"),
    (None, 4096, 64, 4096, "float32"),
    (64, 256, 256, 256, "float32"),
    (None, 2**20, 8, 64, "float32"),  # many short-K rows: a block per row has little to do
    (None, 2**16, 32, 1024, "float32"),
    (None, 64, 4096, 2**16, "float32"),
]


def time_backward(cuda, G, Ix, A_shape, B_shape, repeats: int) -> tuple[float, Any]:
    from lazykern import tropical

    stream = cuda.stream()
    out = tropical.matmul_backward(G, Ix, A_shape, B_shape, stream=stream)
    stream.synchronize()
    times = []
    with cuda.defer_cleanup():  # no cuMemFree (a device sync) between the timed calls, as in benchmarks.gemm
        for _ in range(repeats):
            start, end = cuda.event(), cuda.event()
            start.record(stream)
            tropical.matmul_backward(G, Ix, A_shape, B_shape, stream=stream, out=out)
            end.record(stream)
            end.synchronize()
            times.append(cuda.event_elapsed_time(start, end) / 1e3)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    from numba import cuda

    from lazykern import tropical

    rng = np.random.default_rng(0)
    rows = []
    for batch, M, K, N, dtype in SHAPES:
        lead = () if batch is None else (batch,)
        A = cuda.to_device(rng.standard_normal(lead + (M, K)).astype(dtype))
        B = cuda.to_device(rng.standard_normal(lead + (K, N)).astype(dtype))
        fn = tropical.matmul if batch is None else tropical.bmm
        _, Ix = fn(A, B, "maxplus", argmax=True)
        G = cuda.to_device(rng.standard_normal(Ix.shape).astype(dtype))
        t_new, (gA, gB) = time_backward(cuda, G, Ix, A.shape, B.shape, args.repeats)
        library_plan = plan.backward_plan
        plan.backward_plan = functools.partial(library_plan, atomic=True)
        try:
            t_old, (oA, oB) = time_backward(cuda, G, Ix, A.shape, B.shape, args.repeats)
        finally:
            plan.backward_plan = library_plan
        tol = 1e-3 if dtype == "float32" else 1e-9
        same = all(np.allclose(x.copy_to_host(), y.copy_to_host(), rtol=tol, atol=tol) for x, y in ((gA, oA), (gB, oB)))
        item = np.dtype(dtype).itemsize
        nbytes = G.size * (item + 4) + (A.size + B.size) * item
        row = {"shape": f"{'' if batch is None else f'{batch} x '}{M}x{K}x{N}", "dtype": dtype, "same": bool(same),
               "shared_ms": t_new * 1e3, "atomic_ms": t_old * 1e3, "speedup": t_old / t_new,
               "shared_gb_s": nbytes / t_new / 1e9, "atomic_gb_s": nbytes / t_old / 1e9}  # fmt: skip
        rows.append(row)
        print(f"{row['shape']:20s} {dtype:8s} shared {row['shared_ms']:8.3f} ms {row['shared_gb_s']:7.0f} GB/s   "
              f"atomic {row['atomic_ms']:8.3f} ms {row['atomic_gb_s']:7.0f} GB/s   x{row['speedup']:5.2f} "
              f"{'same' if same else 'DIFFERENT'}")  # fmt: skip
    dev = cuda.get_current_device()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"device": str(dev.name.decode() if isinstance(dev.name, bytes) else dev.name),
                       "date": datetime.date.today().isoformat(), "command": " ".join(sys.argv),
                       "repeats": args.repeats, "rows": rows}, fh, indent=2)  # fmt: skip


if __name__ == "__main__":
    main()

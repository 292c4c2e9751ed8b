"""Tropical GEMM throughput smoke test: T tropical MAC/s per case (CUDA events, median of repeats).

    python benchmarks/tropical_smoke.py --out tropical_smoke.json [--repeats 10] [--quick]

Cases: f32 max-plus 4096^3 and 8192^3, i32 and f64 max-plus 4096^3, f32 max-plus
with argmax 4096^3, a tall skinny (2^21 x 4) x (4 x 4) product, a batch of
2^21 4x4x4 products, and two split-K shapes (64 x 4096 x 64, argmax 256^3; the
times include both launches and the host-side launch path). Compile time (first call) is reported apart from the timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="skip the 8192^3 case")
    args = parser.parse_args()

    from numba import cuda

    from lazykern import tropical

    cases = [
        ("maxplus f32 4096^3", "maxplus", "float32", False, (None, 4096, 4096, 4096)),
        ("maxplus f32 8192^3", "maxplus", "float32", False, (None, 8192, 8192, 8192)),
        ("maxplus i32 4096^3", "maxplus", "int32", False, (None, 4096, 4096, 4096)),
        ("maxplus f64 4096^3", "maxplus", "float64", False, (None, 4096, 4096, 4096)),
        ("maxplus f32 argmax 4096^3", "maxplus", "float32", True, (None, 4096, 4096, 4096)),
        ("maxplus f32 (2^21 x 4) x (4 x 4)", "maxplus", "float32", False, (None, 2**21, 4, 4)),
        ("bmm maxplus f32 2^21 x (4x4x4)", "maxplus", "float32", False, (2**21, 4, 4, 4)),
        ("maxplus f32 64 x 4096 x 64 (split-K)", "maxplus", "float32", False, (None, 64, 4096, 64)),
        ("maxplus f32 argmax 256^3 (split-K)", "maxplus", "float32", True, (None, 256, 256, 256)),
    ]
    if args.quick:
        cases = [c for c in cases if "8192" not in c[0]]
    dev = cuda.get_current_device()
    results = {"device": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name), "cases": []}
    rng = np.random.default_rng(0)
    for label, semiring, dtype, argmax, (batch, M, K, N) in cases:
        a_shape = (M, K) if batch is None else (batch, M, K)
        b_shape = (K, N) if batch is None else (batch, K, N)
        if np.dtype(dtype).kind == "f":
            A = cuda.to_device(rng.standard_normal(a_shape, dtype=np.float32).astype(dtype))
            B = cuda.to_device(rng.standard_normal(b_shape, dtype=np.float32).astype(dtype))
        else:
            A = cuda.to_device(rng.integers(-1000, 1000, a_shape).astype(dtype))
            B = cuda.to_device(rng.integers(-1000, 1000, b_shape).astype(dtype))
        fn = tropical.matmul if batch is None else tropical.bmm
        stream = cuda.stream()
        t0 = time.perf_counter()
        out = fn(A, B, semiring, argmax=argmax, stream=stream)
        stream.synchronize()
        first = time.perf_counter() - t0
        outs = out if argmax else (out,)
        pair = tuple(outs) if argmax else outs[0]
        for _ in range(2):  # warm-up
            fn(A, B, semiring, argmax=argmax, out=pair, stream=stream)
        times = []
        for _ in range(args.repeats):
            start, end = cuda.event(), cuda.event()
            start.record(stream)
            fn(A, B, semiring, argmax=argmax, out=pair, stream=stream)
            end.record(stream)
            end.synchronize()
            times.append(cuda.event_elapsed_time(start, end) / 1e3)
        med = statistics.median(times)
        macs = (batch or 1) * M * N * K
        row = {
            "case": label,
            "macs": macs,
            "median_s": med,
            "min_s": min(times),
            "tmacs": macs / med / 1e12,
            "first_call_s": first,
        }
        results["cases"].append(row)
        print(f"{label:36s} {row['tmacs']:8.3f} T MAC/s  median {med * 1e3:9.3f} ms  first call {first:6.2f} s")
        del A, B, out, outs, pair
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()

"""Replay of N small captured kernels against launching them one by one.

For a Numba ``@cuda.jit`` kernel and a lazykern ``KernelFamily`` kernel, each
incrementing a small array, it measures:

- host cost per kernel: time of the launch loop / N (eager), time of one
  ``g.replay()`` call / N (graph); medians over ``--reps``;
- GPU span: CUDA events around the N eager launches, and around one replay.

Targets (issue 4): replay host cost <= 1.5 us per kernel, and a GPU span at
least 20x shorter as a graph. Prints a table and writes JSON to --out.

    python benchmarks/graph_replay.py --kernels 200 --reps 50 --out graph_replay.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

HOST_TARGET_US = 1.5
SPAN_TARGET_RATIO = 20.0
SIZE = 1024
GRID, BLOCK = SIZE // 256, 256

INC_SOURCE = (
    'extern "C" __global__ void inc_f32(float *a, int n) {'
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += 1.0f; }"
)


def numba_launcher(stream: Any, a: Any) -> Callable[[], None]:
    from numba import cuda

    @cuda.jit
    def inc(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1

    configured = inc[GRID, BLOCK, stream]
    return lambda: configured(a)


def numba3_launcher(stream: Any, a: Any) -> Callable[[], None]:
    """The same increment through a 3-array Numba kernel: DESIGN.md's baseline (10.1 ms for 200 launches)."""
    from numba import cuda

    b, c = cuda.to_device(np.zeros(SIZE, np.float32)), cuda.to_device(np.zeros(SIZE, np.float32))

    @cuda.jit
    def inc3(x, y, z):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1 + y[i] * z[i]

    configured = inc3[GRID, BLOCK, stream]
    return lambda: configured(a, b, c)


def lazykern_launcher(stream: Any, a: Any, cache_dir: str) -> Callable[[], None]:
    from lazykern import KernelCache, KernelFamily

    family = KernelFamily("bench_graph_replay", cache=KernelCache(cache_dir))
    family.add("inc_f32", INC_SOURCE, signature=["ptr", "int32"])
    configured = family["inc_f32"][GRID, BLOCK, stream]
    n = np.int32(SIZE)
    return lambda: configured(a, n)


def _timed(stream: Any, body: Callable[[], None], kernels: int, reps: int) -> tuple[list[float], list[float]]:
    """Per rep: host us per kernel spent in ``body`` and the GPU span (ms) it queued, by events."""
    from numba import cuda

    start, end = cuda.event(), cuda.event()
    host, span = [], []
    for _ in range(reps):
        start.record(stream)
        t0 = time.perf_counter()
        body()
        t1 = time.perf_counter()
        end.record(stream)
        end.synchronize()
        host.append((t1 - t0) / kernels * 1e6)
        span.append(cuda.event_elapsed_time(start, end))
    return host, span


def measure(name: str, make: Callable[[Any, Any], Callable[[], None]], kernels: int, reps: int) -> dict[str, Any]:
    from numba import cuda

    from lazykern import graph

    stream = cuda.stream()
    a = cuda.to_device(np.zeros(SIZE, np.float32))
    launch = make(stream, a)
    runs = 0

    for _ in range(kernels):  # warm-up: compile, load, first-launch costs
        launch()
    runs += kernels
    stream.synchronize()

    def launch_all() -> None:
        for _ in range(kernels):
            launch()

    eager_host, eager_span = _timed(stream, launch_all, kernels, reps)
    runs += reps * kernels

    with graph.capture(stream) as g:
        for _ in range(kernels):
            launch()
    g.upload()
    g.replay()
    runs += kernels
    stream.synchronize()

    replay_host, graph_span = _timed(stream, g.replay, kernels, reps)
    runs += reps * kernels

    result = a.copy_to_host()
    correct = bool((result == runs).all())
    eager_ms, graph_ms = statistics.median(eager_span), statistics.median(graph_span)
    replay_us = statistics.median(replay_host)
    return {
        "kernel": name,
        "kernels": kernels,
        "kernel_nodes": g.kernel_count,
        "eager_host_us_per_kernel": statistics.median(eager_host),
        "replay_host_us_per_kernel": replay_us,
        "eager_span_ms": eager_ms,
        "graph_span_ms": graph_ms,
        "span_ratio": eager_ms / graph_ms if graph_ms > 0 else float("inf"),
        "results_correct": correct,
        "host_target_met": replay_us <= HOST_TARGET_US,
        "span_target_met": eager_ms / graph_ms >= SPAN_TARGET_RATIO if graph_ms > 0 else True,
    }


def device_scalar_set_cost(reps: int) -> float:
    """Median host cost of DeviceScalar.set (async 4-byte copy + event record), in us."""
    from numba import cuda

    from lazykern import graph

    stream = cuda.stream()
    step = graph.DeviceScalar(np.int32(0), stream=stream)
    costs = []
    for i in range(reps * 10):
        t0 = time.perf_counter()
        step.set(i)
        costs.append((time.perf_counter() - t0) * 1e6)
    stream.synchronize()
    assert step.value == reps * 10 - 1
    return statistics.median(costs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=200)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out", default="graph_replay.json")
    args = parser.parse_args()

    from numba import cuda

    with tempfile.TemporaryDirectory(prefix="lazykern-bench-") as cache_dir:
        rows = [
            measure("numba @cuda.jit", numba_launcher, args.kernels, args.reps),
            measure("numba @cuda.jit, 3 arrays", numba3_launcher, args.kernels, args.reps),
            measure(
                "lazykern KernelFamily",
                lambda s, a: lazykern_launcher(s, a, cache_dir),
                args.kernels,
                args.reps,
            ),
        ]
    set_us = device_scalar_set_cost(args.reps)

    header = (
        f"{'kernel':<28}{'eager us/k':>11}{'replay us/k':>12}{'eager span ms':>15}"
        f"{'graph span ms':>15}{'ratio':>8}{'ok':>5}"
    )
    print(f"{args.kernels} kernels of {SIZE} elements, median of {args.reps} reps")
    print(header)
    for r in rows:
        ok = r["results_correct"] and r["host_target_met"] and r["span_target_met"]
        print(
            f"{r['kernel']:<28}{r['eager_host_us_per_kernel']:>11.2f}{r['replay_host_us_per_kernel']:>12.3f}"
            f"{r['eager_span_ms']:>15.3f}{r['graph_span_ms']:>15.3f}{r['span_ratio']:>8.1f}{'yes' if ok else 'NO':>5}"
        )
    print(f"targets: replay <= {HOST_TARGET_US} us per kernel, span ratio >= {SPAN_TARGET_RATIO}x")
    print(f"DeviceScalar.set host cost: {set_us:.2f} us")

    device = cuda.get_current_device()
    report = {
        "device": device.name.decode() if isinstance(device.name, bytes) else str(device.name),
        "python": platform.python_version(),
        "kernels": args.kernels,
        "reps": args.reps,
        "targets": {"replay_host_us_per_kernel": HOST_TARGET_US, "span_ratio": SPAN_TARGET_RATIO},
        "rows": rows,
        "device_scalar_set_us": set_us,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

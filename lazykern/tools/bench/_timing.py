"""GPU time of one call, measured so that neither the host nor the L2 cache flatters it.

* CUDA events bracket a batch of calls; the sample is the batch's span / its size.
* Before each batch a one-thread kernel spins on the GPU for longer than the host
  needs to enqueue the batch, so the batch runs back to back and the figure is
  GPU time, not Python launch overhead (the "blocking kernel" of nvbench).
* The caller's ``fn(i)`` rotates through input buffers by ``i`` (see
  :func:`buffers_for`), so small shapes are read from DRAM as in real use.
* The figure is the median of the samples; warm-up calls (first-use compiles
  included) are not timed.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol


class Clock(Protocol):
    """Where a timer's marks are made: CUDA events on a stream, or a fake in tests."""

    def mark(self) -> Any: ...

    def seconds_between(self, start: Any, end: Any) -> float: ...

    def wait(self, mark: Any) -> None: ...

    def spin(self, seconds: float) -> None: ...


@dataclasses.dataclass(frozen=True)
class Measurement:
    """Per-call seconds of each sample; ``batch`` calls made each sample."""

    samples: tuple[float, ...]
    batch: int
    warmup: int

    @property
    def median(self) -> float:
        return median(self.samples)

    def as_dict(self) -> dict[str, Any]:
        return {
            "median_ms": self.median * 1e3,
            "min_ms": min(self.samples) * 1e3,
            "max_ms": max(self.samples) * 1e3,
            "samples": len(self.samples),
            "calls_per_sample": self.batch,
            "warmup_calls": self.warmup,
        }


def median(values: Sequence[float]) -> float:
    """The median; refuses an empty sequence instead of returning a made-up figure.

    >>> median([3.0, 1.0, 2.0]), median([4.0, 1.0, 2.0, 3.0])
    (2.0, 2.5)
    """
    if not values:
        raise ValueError("median of no samples: the case was never measured")
    return float(statistics.median(values))


def buffers_for(bytes_per_call: int, l2_bytes: int, *, factor: float = 3.0, cap: int = 256) -> int:
    """How many input/output sets to rotate so one pass touches ``factor`` x the L2 size.

    >>> buffers_for(128 << 20, 50 << 20), buffers_for(512 << 10, 50 << 20), buffers_for(1, 50 << 20)
    (2, 256, 256)
    """
    if bytes_per_call <= 0:
        raise ValueError(f"bytes_per_call must be positive, got {bytes_per_call}")
    return max(1, min(cap, math.ceil(factor * l2_bytes / bytes_per_call)))


def measure(
    fn: Callable[[int], object],
    clock: Clock,
    *,
    warmup: int = 3,
    min_samples: int = 10,
    min_seconds: float = 0.2,
    max_seconds: float = 10.0,
    sample_seconds: float = 1e-3,
    max_batch: int = 512,
    spin_cap: float = 0.05,
) -> Measurement:
    """Time ``fn(i)`` (which enqueues one call using buffer ``i``) on ``clock``.

    Samples are taken until there are ``min_samples`` and ``min_seconds`` of
    GPU time, or ``max_seconds`` of wall time have passed with at least 3.
    Each sample holds enough calls to span ``sample_seconds``.
    """
    start_wall = time.perf_counter()
    i = 0
    done_warmup = 0
    while done_warmup < max(1, warmup):
        fn(i)
        i += 1
        done_warmup += 1
        if time.perf_counter() - start_wall > max_seconds / 4:
            break
    clock.wait(clock.mark())

    # One call with the queue held back gives the batch size.
    t0 = time.perf_counter()
    fn(i)
    host_one = time.perf_counter() - t0
    clock.spin(min(spin_cap, 2 * host_one + 1e-4))
    a = clock.mark()
    fn(i + 1)
    b = clock.mark()
    clock.wait(b)
    i += 2
    one = max(clock.seconds_between(a, b), 1e-7)
    batch = max(1, min(max_batch, math.ceil(sample_seconds / one)))

    samples: list[float] = []
    gpu_total = 0.0
    host_batch = host_one * batch
    while len(samples) < min_samples or gpu_total < min_seconds:
        if len(samples) >= 3 and time.perf_counter() - start_wall > max_seconds:
            break
        clock.spin(min(spin_cap, 1.5 * host_batch + 2e-5))
        a = clock.mark()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn(i)
            i += 1
        host_batch = time.perf_counter() - t0
        b = clock.mark()
        clock.wait(b)
        span = clock.seconds_between(a, b)
        samples.append(span / batch)
        gpu_total += span
    return Measurement(tuple(samples), batch, done_warmup)


class CudaEventClock:
    """CUDA events recorded on a Numba stream; ``spin`` holds that stream back on the GPU."""

    def __init__(self, stream: Any, clock_hz: float | None) -> None:
        from numba import cuda

        self._cuda = cuda
        self.stream = stream
        self.clock_hz = clock_hz or 1.5e9
        self._spin = _spin_kernel()

    def mark(self) -> Any:
        event = self._cuda.event(timing=True)
        event.record(self.stream)
        return event

    def seconds_between(self, start: Any, end: Any) -> float:
        return float(self._cuda.event_elapsed_time(start, end)) / 1e3

    def wait(self, mark: Any) -> None:
        mark.synchronize()

    def spin(self, seconds: float) -> None:
        import numpy as np

        cycles = int(seconds * self.clock_hz)
        if cycles > 0:
            self._spin[1, 1, self.stream](np.int64(cycles))


_SPIN_SOURCE = """
extern "C" __global__ void lazykern_bench_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


def _spin_kernel() -> Any:
    """The spin kernel, through lazykern itself (compiled once per machine, then loaded)."""
    from lazykern import KernelFamily

    family = KernelFamily("lazykern_bench")
    family.add("spin", _SPIN_SOURCE, symbol="lazykern_bench_spin", signature=["int64"])
    return family["spin"]

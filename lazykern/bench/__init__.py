"""Benchmark suites: tropical GEMM throughput against the hardware limit, and start-up cost.

* :mod:`lazykern.bench.gemm` -- T tropical MAC/s per shape, semiring and dtype,
  as a percentage of the device's issue limit, torch side by side (GPU only).
* :mod:`lazykern.bench.startup` -- cold vs warm start, eager vs lazy compilation,
  in fresh processes (compile-only figures where there is no GPU).

Each has ``run(...) -> dict`` (writes JSON + PNG when given a directory),
``table(result)`` (a rich Table) and ``main(argv)`` (``python -m benchmarks.gemm``).
Nothing heavy is imported here: ``import lazykern.bench`` needs neither a GPU nor torch.
"""

from __future__ import annotations

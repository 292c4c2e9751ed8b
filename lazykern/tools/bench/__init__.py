"""Benchmark suites: tropical GEMM throughput against the hardware limit, and start-up cost.

* :mod:`lazykern.tools.bench.gemm` -- T tropical MAC/s per shape, semiring and dtype,
  as a percentage of the device's issue limit, torch side by side (GPU only).
* :mod:`lazykern.tools.bench.startup` -- cold vs warm start, eager vs lazy compilation,
  in fresh processes (compile-only figures where there is no GPU).

Each has ``run(...) -> dict`` (writes JSON + PNG when given a directory) and
``table(result)`` (a rich Table): what ``lazykern bench`` needs. The command-line
entry points with more switches (``python -m benchmarks.gemm``), the tuning sweeps
and the probes live in the repository's ``benchmarks/``, not in the package.
Nothing heavy is imported here: ``import lazykern.tools.bench`` needs neither a GPU nor torch.
"""

from __future__ import annotations

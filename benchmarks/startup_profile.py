"""Profile of a warm-cache fresh process: where the milliseconds of `family[name]` go (GPU machine)."""

from __future__ import annotations

import cProfile
import io
import pstats
import time

from numba import cuda

cuda.current_context()
import lazykern  # noqa: E402
from lazykern import KernelFamily  # noqa: E402

fam = KernelFamily("b", "")
fam.add("k", 'extern "C" __global__ void k(int *a) { *a = 1; }')
pr = cProfile.Profile()
t = time.perf_counter()
pr.enable()
k = fam["k"]
k.function()
pr.disable()
print(f"usable after {1e3 * (time.perf_counter() - t):.2f} ms (profiled), compiles {fam.compile_calls}")
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(25)
print(s.getvalue()[:6000])
print(lazykern.__version__)

"""A family of tiny real kernels for the liveness scenarios: cheap to compile, many of them.

Worker processes import it by name (``tests.liveness._family:family``); ``LIVENESS_KERNELS``
sets how many kernels it has (default 200), so a scenario can have work left to interrupt.
"""

from __future__ import annotations

import os

from lazykern import KernelFamily

PREAMBLE = "#define BUMP(i) ((i) + 1)\n"


def make_family(n: int) -> KernelFamily:
    fam = KernelFamily("liveness", PREAMBLE)
    for i in range(n):
        fam.add(
            f"add_{i}",
            f'extern "C" __global__ void add_{i}(int *a, int n) {{'
            f" int j = blockIdx.x * blockDim.x + threadIdx.x; if (j < n) a[j] += BUMP({i}); }}",
            signature=["ptr", "int32"],
        )
    return fam


family = make_family(int(os.environ.get("LIVENESS_KERNELS", "200")))

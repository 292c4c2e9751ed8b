"""Launch the library's large-tile 4096^3 max-plus kernels once per dtype (for ``ncu`` stall reasons).

ncu -k regex:'^maxplus_(f32|f64|i32)(_argmax)?$' --section WarpStateStats python3 benchmarks/profile_gemm.py
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from lazykern import tropical


def main() -> None:
    rng = np.random.default_rng(0)
    n = 4096
    for dtype in ("float32", "float64", "int32"):
        if dtype == "int32":
            A, B = (rng.integers(-1000, 1000, (n, n)).astype(dtype) for _ in range(2))
        else:
            A, B = (rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
        dA, dB = cuda.to_device(A), cuda.to_device(B)
        tropical.matmul(dA, dB, "maxplus")
        if dtype == "int32":
            tropical.matmul(dA, dB, "maxplus", argmax=True)
        cuda.synchronize()


if __name__ == "__main__":
    main()

"""``python -m benchmarks.gemm [--quick] [--out DIR]``: see :mod:`lazykern.bench.gemm`."""

from __future__ import annotations

import sys

from lazykern.bench.gemm import main

if __name__ == "__main__":
    sys.exit(main())

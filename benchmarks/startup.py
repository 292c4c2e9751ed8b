"""``python -m benchmarks.startup [--quick] [--out DIR]``: see :mod:`lazykern.bench.startup`."""

from __future__ import annotations

import sys

from lazykern.bench.startup import main

if __name__ == "__main__":
    sys.exit(main())

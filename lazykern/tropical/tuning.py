"""Knobs for tile sweeps and tests: not needed to use the library.

>>> from lazykern.tropical.tuning import forced_tile
>>> with forced_tile("s"):
...     pass  # every tropical.matmul / bmm here uses the small tile
"""

from __future__ import annotations

from .api import forced_tile  # the tile pin is api's own global: api sets it

__all__ = ["forced_tile"]

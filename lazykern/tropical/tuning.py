"""Knobs for tile sweeps and tests: not needed to use the library.

>>> from lazykern.tropical.tuning import forced_tile
>>> with forced_tile("s"):
...     pass  # every tropical.matmul / bmm here uses the small tile
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from . import api


@contextmanager
def forced_tile(tile: str) -> Iterator[None]:
    """Within the block every product uses tile variant ``tile`` ("", "s", "t", "r", "r4", "splitk")
    instead of the planner's choice; a shape the variant cannot take raises ValueError."""
    before = api._FORCE_TILE
    api._FORCE_TILE = tile
    try:
        yield
    finally:
        api._FORCE_TILE = before

"""Slicing a path until its intermediates fit a memory limit (:func:`slice_to`, no tree search), and the warning where
that slicing costs far more than the same order unsliced.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .inputs import Label
from .paths import costs, sub, tally


def slice_to(
    terms: Any, output: Any, sizes: Any, path: list[tuple[int, ...]], limit: int
) -> tuple[list[tuple[int, ...]], list[Label]]:
    """``path`` with labels sliced until its intermediates fit ``limit`` entries: each time, of the
    ``_SLICE_CANDIDATES`` labels carried by the most intermediates over the limit, the one that adds
    the fewest multiply-adds. A few walks over the path per label, no tree search: it holds on a
    3000-step sweep, where cotengra's tree recursion does not."""
    sliced: dict[Label, int] = {}
    while True:
        over = _oversized(terms, output, sizes, path, sliced, limit)
        if not over:
            return path, list(sliced)
        candidates = [x for x, _ in over.most_common(_SLICE_CANDIDATES)]  # first met first among equals
        label = min(candidates, key=lambda x: costs(terms, output, sizes, path, sub(sizes, [*sliced, x]))[1])
        sliced[label] = sizes[label]


_SLICE_CANDIDATES = 3


def _oversized(
    terms: Any, output: Any, sizes: Any, path: Sequence[tuple[int, ...]], sliced: dict[Label, int], limit: int
) -> Counter[Label]:
    """How many intermediates over ``limit`` entries carry each label (sliced labels count 1 entry)."""
    size = {k: (1 if k in sliced else v) for k, v in sizes.items()}
    output = set(output)
    live = [set(t) for t in terms]
    uses = Counter(x for t in live for x in t)
    over: Counter[Label] = Counter()
    for step in path:
        picked = [live[i] for i in step]
        for i in sorted(step, reverse=True):
            tally(uses, live.pop(i), -1)
        kept = {x for t in picked for x in t if x in output or uses[x] > 0}
        if math.prod(size[x] for x in kept) > limit:
            over.update(x for x in sorted(kept, key=str) if x not in sliced and x not in output)
        live.append(kept)
        tally(uses, kept, 1)
    return over


COSTLY_SLICING = 16  # times the unsliced multiply-adds past which a memory limit's slicing is reported


def warn_if_costly(path: Any, flops: int, unsliced: int, count: int, limit: int) -> None:
    if flops <= COSTLY_SLICING * unsliced:
        return
    from ...errors import LazykernWarning, warn_user

    warn_user(
        f"tropical contraction plan: fitting intermediates to memory_limit={limit} entries slices "
        f"{count} labels and costs {flops:.3g} multiply-adds, {flops / unsliced:.3g} times the "
        f"{unsliced:.3g} of the same order unsliced; raise memory_limit (or leave it to the default, "
        "sized to the device) if the memory allows",
        LazykernWarning,
    )

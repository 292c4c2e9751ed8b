"""How the tiled bit-permutation copy (``permute_tiled_*`` in :mod:`._permute`) splits a tensor into tiles.

The plain copy writes the output in order and reads the source wherever each entry lies: when the
output's lowest bits are not the source's nearest (a step operand transposed so its contracted axes come
last), a warp's 32 reads touch 32 sectors and the copy ran at about 620 GB/s on an H200 (session 59).
The tiled copy moves 2^10 entries per tile through shared memory: the tile's bits are the output's 5
lowest and the 5 whose source strides are smallest (filled up to 10 with the next lowest output bits).
A tile is read in *source order* (its bits sorted by stride: consecutive threads read neighbours) and
written in *output order* (consecutive threads write neighbours). Four 32-entry tables per block turn a
thread's index into offsets (5 bits each), and the tile's slot ``t`` is stored at ``t ^ (t >> 5 & 31)``
so that neither phase's 32 threads share a bank. The remaining bits pick the tile.

:func:`reference` runs that addressing (tables, swizzle, tile bases) in NumPy: the GPU route's host
stand-in copies through it, so the CPU tests check the kernel's arithmetic and not only its intent.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

TILE_BITS = 10  # a tile's entries: 2^10, 4 per thread of 256
LANE_BITS = 5  # a warp's 32 neighbours: the output's 5 lowest bits, and the source's 5 nearest


class Tiling(NamedTuple):
    """A tile's bits: ``strides`` in source order (nearest first), ``ranks`` each one's place in output
    order, ``outs`` the output bit of each place in output order, ``mask`` the tile's output bits."""

    strides: tuple[int, ...]
    ranks: tuple[int, ...]
    outs: tuple[int, ...]
    mask: int

    def packed(self) -> tuple[int, int]:
        """``ranks`` (4 bits each) and ``outs`` (6 bits each) as the kernel's two int64 arguments."""
        ranks = sum(r << (4 * i) for i, r in enumerate(self.ranks))
        outs = sum(b << (6 * i) for i, b in enumerate(self.outs))
        return ranks, outs

    def arguments(self) -> tuple[int, ...]:
        """The kernel's tile arguments after the strides: ``near``, ``ranks``, ``outs``, ``mask``."""
        return (*self.strides, *self.packed(), self.mask)


def tiling(bits: list[int]) -> Tiling | None:
    """The tile of a copy whose output bit ``b`` reads the source at stride ``bits[b]``, or None where
    the plain copy's reads already coalesce (the output's 5 lowest bits are the source's 5 nearest, in
    order) or the tensor holds fewer than 2^10 entries. Remembered per layout: a k-best call copies
    operands of the same few layouts hundreds of times."""
    if len(bits) < TILE_BITS:
        return None
    return _tiling(tuple(bits))


@functools.lru_cache(maxsize=4096)
def _tiling(bits: tuple[int, ...]) -> Tiling | None:
    nearest = sorted(range(len(bits)), key=lambda b: (abs(bits[b]), b))
    if nearest[:LANE_BITS] == list(range(LANE_BITS)):
        return None
    chosen = set(range(LANE_BITS)) | set(nearest[:LANE_BITS])
    rest = [b for b in range(len(bits)) if b not in chosen]
    outs = sorted(chosen | set(rest[: TILE_BITS - len(chosen)]))
    order = sorted(outs, key=lambda b: (abs(bits[b]), b))
    return Tiling(
        tuple(bits[b] for b in order), tuple(outs.index(b) for b in order), tuple(outs), sum(1 << b for b in outs)
    )


def _table(weights: tuple[int, ...]) -> np.ndarray:
    """Entry k: the sum of ``weights[i]`` over the set bits i of k (k < 32), as the kernel's tables."""
    k = np.arange(1 << LANE_BITS, dtype=np.int64)
    return sum((((k >> i) & 1) * w for i, w in enumerate(weights)), np.zeros_like(k))


def reference(flat: np.ndarray, offset: int, bits: list[int], tile: Tiling) -> np.ndarray:
    """What the tiled kernel writes, on the host: tables, swizzled slots and tile bases as the kernel has them."""
    lo, hi = slice(0, LANE_BITS), slice(LANE_BITS, TILE_BITS)
    src_lo, src_hi = _table(tile.strides[lo]), _table(tile.strides[hi])
    at_lo, at_hi = _table(tuple(1 << r for r in tile.ranks[lo])), _table(tuple(1 << r for r in tile.ranks[hi]))
    out_lo, out_hi = _table(tuple(1 << b for b in tile.outs[lo])), _table(tuple(1 << b for b in tile.outs[hi]))
    j = np.arange(1 << TILE_BITS)
    read = src_lo[j & 31] + src_hi[j >> 5]  # thread j's source offset in a tile (source order)
    slot = at_lo[j & 31] | at_hi[j >> 5]  # and the tile slot it fills (output order)
    swizzle = j ^ ((j >> 5) & 31)
    free = [b for b in range(len(bits)) if not (tile.mask >> b) & 1]
    g = np.arange(1 << len(free), dtype=np.int64)
    start = sum((((g >> i) & 1) * bits[b] for i, b in enumerate(free)), np.zeros_like(g))
    to = sum((((g >> i) & 1) << b for i, b in enumerate(free)), np.zeros_like(g))
    shared = np.empty((len(g), 1 << TILE_BITS), flat.dtype)
    shared[:, swizzle[slot]] = flat[offset + start[:, None] + read[None, :]]
    out = np.empty(1 << len(bits), flat.dtype)
    out[to[:, None] + (out_lo[j & 31] + out_hi[j >> 5])[None, :]] = shared[:, swizzle]
    return out

"""Spin glasses on standard graphs: square and cubic lattices, random regular graphs, D-Wave's chimera."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .instance import SpinGlass


def couplings(m: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "pm1":
        return rng.choice(np.array([-1.0, 1.0]), size=m)
    if kind == "gaussian":
        return rng.standard_normal(m)
    if kind == "ferro":
        return np.ones(m)
    raise ValueError(f"couplings must be 'pm1' (+-J), 'gaussian' or 'ferro', got {kind!r}")


def _make(
    n: int,
    edges: Any,
    positions: Any,
    J: str,
    seed: int | None,
    field: float,
    name: str,
    order: Iterable[int] | None = None,
) -> SpinGlass:
    rng = np.random.default_rng(seed)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    h = field * rng.standard_normal(n) if field else np.zeros(n)
    order = None if order is None else tuple(int(i) for i in order)
    return SpinGlass(n, edges, couplings(len(edges), J, rng), h, np.asarray(positions, float), name, order)


def square_lattice(L: int, *, J: str = "pm1", seed: int | None = 0, field: float = 0.0) -> SpinGlass:
    """L x L open-boundary square lattice; spin r * L + c sits at row r, column c.
    ``J``: "pm1" (+-1 with equal probability), "gaussian" or "ferro"; ``field``: the
    standard deviation of Gaussian fields (0: none)."""
    idx = np.arange(L * L).reshape(L, L)
    edges = [(idx[r, c], idx[r, c + 1]) for r in range(L) for c in range(L - 1)]
    edges += [(idx[r, c], idx[r + 1, c]) for r in range(L - 1) for c in range(L)]
    pos = [(c, -r) for r in range(L) for c in range(L)]
    return _make(L * L, edges, pos, J, seed, field, f"square {L}x{L}", order=range(L * L))  # row by row


def cubic_lattice(L: int, *, J: str = "pm1", seed: int | None = 0, field: float = 0.0) -> SpinGlass:
    """L x L x L open-boundary cubic lattice."""
    idx = np.arange(L**3).reshape(L, L, L)
    edges = []
    for axis in range(3):
        a = np.moveaxis(idx, axis, 0)
        edges += list(zip(a[:-1].ravel(), a[1:].ravel()))
    pos = np.stack(np.unravel_index(np.arange(L**3), (L, L, L)), axis=1)
    return _make(L**3, edges, pos, J, seed, field, f"cubic {L}^3")


def random_regular(n: int, degree: int = 3, *, J: str = "pm1", seed: int | None = 0, field: float = 0.0) -> SpinGlass:
    """A uniformly random simple ``degree``-regular graph on n vertices (pairing model with restarts)."""
    if n * degree % 2 or degree >= n:
        raise ValueError(f"no simple {degree}-regular graph on {n} vertices (need n * degree even and degree < n)")
    rng = np.random.default_rng(seed)
    for _ in range(10_000):
        stubs = rng.permutation(np.repeat(np.arange(n), degree)).reshape(-1, 2)
        a, b = stubs.min(axis=1), stubs.max(axis=1)
        if np.all(a != b) and len({(int(x), int(y)) for x, y in zip(a, b)}) == len(a):
            break
    else:
        raise RuntimeError(f"could not draw a simple {degree}-regular graph on {n} vertices")
    order = np.lexsort((b, a))
    angle = 2 * np.pi * np.arange(n) / n
    pos = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return _make(
        n, np.stack([a[order], b[order]], axis=1), pos, J, int(rng.integers(2**31)), field, f"{degree}-regular n={n}"
    )


def chimera(
    m: int = 8, n: int | None = None, t: int = 4, *, J: str = "pm1", seed: int | None = 0, field: float = 0.0
) -> SpinGlass:
    """D-Wave's chimera graph: m x n cells of K_{t,t} (8 x 8 x 4: the 512-qubit chip).

    Qubit (r, c, side, k) is r * n * 2t + c * 2t + side * t + k; side 0 couples to the cell
    below (same k), side 1 to the cell on the right (dwave_networkx's numbering)."""
    n = m if n is None else n

    def q(r: int, c: int, side: int, k: int) -> int:
        return ((r * n + c) * 2 + side) * t + k

    edges = []
    for r in range(m):
        for c in range(n):
            edges += [(q(r, c, 0, i), q(r, c, 1, j)) for i in range(t) for j in range(t)]
            if r + 1 < m:
                edges += [(q(r, c, 0, k), q(r + 1, c, 0, k)) for k in range(t)]
            if c + 1 < n:
                edges += [(q(r, c, 1, k), q(r, c + 1, 1, k)) for k in range(t)]
    pos = []
    for r in range(m):
        for c in range(n):
            for side in range(2):
                for k in range(t):
                    pos.append((c * (t + 2) + (k if side else t / 2), -(r * (t + 2) + (t / 2 if side else k))))
    # Row of cells by row of cells (columns when there are more): first the t vertical spins of every
    # cell (each replaces the one above it), then the t horizontal chains one at a time. The boundary
    # holds t spins per column of cells plus one chain link: 2^(t n + 1) entries, 2^33 for 8 x 8 x 4
    # (cell by cell it would hold all t chain links: 2^36).
    order = []
    if n <= m:
        for r in range(m):
            order += [q(r, c, 0, k) for c in range(n) for k in range(t)]
            order += [q(r, c, 1, k) for k in range(t) for c in range(n)]
    else:
        for c in range(n):
            order += [q(r, c, 1, k) for r in range(m) for k in range(t)]
            order += [q(r, c, 0, k) for k in range(t) for r in range(m)]
    return _make(m * n * 2 * t, edges, pos, J, seed, field, f"chimera {m}x{n}x{t}", order=order)

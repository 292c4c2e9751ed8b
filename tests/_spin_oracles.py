"""Exact spin-glass oracles written apart from the einsum path: brute force, a transfer matrix with
big-integer counts, and minimum-weight perfect matching (planar, zero field, any size)."""

from __future__ import annotations

import itertools
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from lazykern.tn.networks import SpinGlass


def meant(x: Any) -> Fraction:
    """What a number means: ints and Fractions as they are, a float written with at most 9 significant
    digits as that decimal, any other float as its binary value."""
    if isinstance(x, (int, np.integer, Fraction)):
        return Fraction(x)
    d = Decimal(repr(float(x)))
    return Fraction(d) if len(d.normalize().as_tuple().digits) <= 9 else Fraction(float(x))


def exact_enumeration(n: int, edges: Any, J: Any, h: Any = None) -> tuple[Fraction, int]:
    """(E_0 as a Fraction, number of ground states) over all 2^n states, every number read as meant."""
    Jr = [meant(x) for x in J]
    hr = [meant(x) for x in (h if h is not None else [0] * n)]
    best, count = None, 0
    for s in itertools.product((1, -1), repeat=n):
        e = -sum(j * s[a] * s[b] for j, (a, b) in zip(Jr, edges)) - sum(f * si for f, si in zip(hr, s))
        if best is None or e < best:
            best, count = e, 1
        elif e == best:
            count += 1
    assert best is not None
    return best, count


def brute_force(sg: SpinGlass, chunk: int = 1 << 14) -> tuple[float, int, np.ndarray]:
    """(E_0, degeneracy, every ground state as rows of +-1) by enumerating all 2^n states."""
    if sg.n > 22:
        raise ValueError(f"brute force over 2^{sg.n} states is too much")
    best, states = np.inf, []
    bits = np.arange(sg.n)
    for start in range(0, 2**sg.n, chunk):
        codes = np.arange(start, min(start + chunk, 2**sg.n))
        s = 1 - 2 * ((codes[:, None] >> bits) & 1).astype(np.float64)
        e = -(s[:, sg.edges[:, 0]] * s[:, sg.edges[:, 1]]) @ sg.J - s @ sg.h
        low = e.min()
        if low < best - 1e-9:
            best, states = low, []
        if low <= best + 1e-9:
            states.append(s[np.abs(e - best) <= 1e-9])
    ground = np.concatenate(states)
    return float(best), len(ground), ground


def transfer_matrix(sg: SpinGlass, L: int, W: int | None = None) -> tuple[float, int]:
    """(E_0, degeneracy) of an L x W open square lattice (spin r*W+c; W defaults to L), one spin
    at a time; the count is an exact Python int (object arrays once int64 could wrap).

    The state is the window of the last W spins (bit c: column c's most recent spin);
    placing spin (r, c) replaces bit c, whose old value was the spin above it."""
    W = L if W is None else W
    J = _couplings(sg)
    d = np.arange(1 << W)
    score = np.where(d == 0, 0.0, -np.inf)  # before any spin: the all-"+" window, no energy
    count = (d == 0).astype(np.int64)  # int64 while every count is below 2^61, then Python ints
    for r in range(L):
        for c in range(W):
            i = r * W + c
            sv = 1 - 2 * ((d >> c) & 1)  # the new spin, read from the new window
            left = 1 - 2 * ((d >> (c - 1)) & 1) if c > 0 else 0
            base = sg.h[i] * sv + (J.get((i - 1, i), 0.0) * sv * left if c > 0 else 0.0)
            cands = []
            for old in (0, 1):
                src = (d & ~(1 << c)) | (old << c)
                up = J.get((i - W, i), 0.0) * sv * (1 - 2 * old) if r > 0 else 0.0
                cands.append((score[src] + base + up, count[src]))
            (s0, c0), (s1, c1) = cands
            score = np.maximum(s0, s1)
            count = np.where(s0 == score, c0, 0) + np.where(s1 == score, c1, 0)
            count = np.where(np.isfinite(score), count, 0)
            if count.dtype != object and count.max() >= 2**61:  # the next step at most doubles a count
                count = count.astype(object)
    best = score.max()
    return -float(best), int(sum(count[score == best].tolist()))


def matching_energy(sg: SpinGlass, L: int, W: int | None = None) -> float:
    """E_0 of an L x W open square lattice (spin r*W+c) with no field, by minimum-weight perfect
    matching of its frustrated plaquettes (pymatching), at any size: E_0 = -sum |J| + 2 * (the
    least total |J| of bonds left unsatisfied, whose dual edges pair up the frustrated plaquettes
    or take them to the open boundary)."""
    import pymatching

    W = L if W is None else W
    if np.any(sg.h != 0):
        raise ValueError("the matching oracle holds for zero fields only")
    J = _couplings(sg)
    bonds = []  # (coupling, the plaquettes on either side; -1: the boundary)
    for r in range(L):
        for c in range(W):
            i = r * W + c
            if c + 1 < W:  # horizontal: plaquettes (r - 1, c) above and (r, c) below
                bonds.append((J.get((i, i + 1), 0.0), _plaquette(r - 1, c, L, W), _plaquette(r, c, L, W)))
            if r + 1 < L:  # vertical: plaquettes (r, c - 1) and (r, c)
                bonds.append((J.get((i, i + W), 0.0), _plaquette(r, c - 1, L, W), _plaquette(r, c, L, W)))
    plaquettes = (L - 1) * (W - 1)
    frustrated = np.zeros(plaquettes + len(bonds), dtype=np.uint8)
    m = pymatching.Matching()
    boundary = set()
    for k, (j, a, b) in enumerate(bonds):
        for p in (a, b):
            if p >= 0 and j < 0:
                frustrated[p] ^= 1
        ends = [p for p in (a, b) if p >= 0]
        if len(ends) == 1:  # a boundary node of its own: a corner plaquette has two boundary bonds
            ends.append(plaquettes + k)
            boundary.add(plaquettes + k)
        if len(ends) == 2:
            m.add_edge(ends[0], ends[1], weight=abs(j), fault_ids={k})
    m.set_boundary_nodes(boundary)
    total = sum(abs(j) for j, _, _ in bonds)
    if not frustrated.any():
        return -float(total)
    broken = m.decode(frustrated[: m.num_detectors])  # boundary nodes are never defects
    return -float(total) + 2.0 * float(sum(abs(bonds[k][0]) for k in np.flatnonzero(broken)))


def _plaquette(r: int, c: int, L: int, W: int) -> int:
    return r * (W - 1) + c if 0 <= r < L - 1 and 0 <= c < W - 1 else -1


def _couplings(sg: SpinGlass) -> dict[tuple[int, int], float]:
    return {(int(min(a, b)), int(max(a, b))): float(j) for (a, b), j in zip(sg.edges, sg.J)}

"""Exact spin-glass oracles written apart from the einsum path: brute force and a transfer matrix."""

from __future__ import annotations

import numpy as np

from lazykern.tropical.networks import SpinGlass


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


def transfer_matrix(sg: SpinGlass, L: int) -> tuple[float, int]:
    """(E_0, degeneracy) of an L x L open square lattice (spin r*L+c), one spin at a time.

    The state is the window of the last L spins (bit c: column c's most recent spin);
    placing spin (r, c) replaces bit c, whose old value was the spin above it."""
    J = {(int(min(a, b)), int(max(a, b))): float(j) for (a, b), j in zip(sg.edges, sg.J)}
    d = np.arange(1 << L)
    score = np.where(d == 0, 0.0, -np.inf)  # before any spin: the all-"+" window, no energy
    count = (d == 0).astype(np.int64)
    for r in range(L):
        for c in range(L):
            i = r * L + c
            sv = 1 - 2 * ((d >> c) & 1)  # the new spin, read from the new window
            left = 1 - 2 * ((d >> (c - 1)) & 1) if c > 0 else 0
            base = sg.h[i] * sv + (J.get((i - 1, i), 0.0) * sv * left if c > 0 else 0.0)
            cands = []
            for old in (0, 1):
                src = (d & ~(1 << c)) | (old << c)
                up = J.get((i - L, i), 0.0) * sv * (1 - 2 * old) if r > 0 else 0.0
                cands.append((score[src] + base + up, count[src]))
            (s0, c0), (s1, c1) = cands
            score = np.maximum(s0, s1)
            count = np.where(s0 == score, c0, 0) + np.where(s1 == score, c1, 0)
            count = np.where(np.isfinite(score), count, 0)
    best = score.max()
    return -float(best), int(count[score == best].sum())

"""Spot checks against the NumPy reference, so a fast wrong kernel reports a failure, not a figure.

Only a sampled sub-block is recomputed (rows x columns, all of k): cheap on the
host even at 8192^3, and any indexing or tiling bug shows up in it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Check:
    ok: bool
    checked: int
    mismatches: int
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sample(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted distinct indices in ``range(n)``, always holding the first and the last.

    >>> sample(5, 10, np.random.default_rng(0)).tolist()
    [0, 1, 2, 3, 4]
    """
    if n <= count:
        return np.arange(n)
    middle = rng.choice(np.arange(1, n - 1), size=count - 2, replace=False)
    return np.sort(np.concatenate([[0, n - 1], middle]))


def _compare(got: np.ndarray, want: np.ndarray, what: str, *, rtol: float = 0.0, atol: float = 0.0) -> Check:
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return Check(False, want.size, want.size, f"{what}: shape {got.shape}, expected {want.shape}")
    if np.issubdtype(want.dtype, np.floating):
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = got != want
    count = int(bad.sum())
    if not count:
        return Check(True, want.size, 0)
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return Check(False, want.size, count, f"{what}{list(idx)}: got {got[idx]!r}, expected {want[idx]!r}")


def _merge(checks: list[Check]) -> Check:
    bad = [c for c in checks if not c.ok]
    return Check(
        not bad,
        sum(c.checked for c in checks),
        sum(c.mismatches for c in checks),
        "; ".join(c.detail for c in bad[:3]),
    )


def check_matmul(
    reference: Callable[..., Any],
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    K: np.ndarray | None = None,
    *,
    semiring: str,
    rng: np.random.Generator,
    count: int = 48,
) -> Check:
    """Compare ``C`` (and the argmax ``K``) on sampled rows x columns with ``reference``.

    Batched operands (3-D) are checked on up to three sampled batches.
    """
    if A.ndim == 3:
        batches = sample(A.shape[0], 3, rng)
        return _merge(
            [
                check_matmul(reference, A[b], B[b], C[b], None if K is None else K[b], semiring=semiring, rng=rng)
                for b in batches
            ]
        )
    if C.shape != (A.shape[0], B.shape[1]):
        return Check(False, C.size, C.size, f"C: shape {C.shape}, expected {(A.shape[0], B.shape[1])}")
    rows = sample(A.shape[0], count, rng)
    cols = sample(B.shape[1], count, rng)
    block = np.ix_(rows, cols)
    argmax = K is not None
    want = reference(np.ascontiguousarray(A[rows]), np.ascontiguousarray(B[:, cols]), semiring=semiring, argmax=argmax)
    want_c, want_k = want if argmax else (want, None)
    tight = 1e-6 if C.dtype == np.float32 else 1e-12
    checks = [_compare(C[block], want_c, "C", rtol=tight, atol=0.0)]
    if argmax:
        checks.append(_compare(np.asarray(K)[block].astype(np.int64), np.asarray(want_k).astype(np.int64), "argmax"))
    return _merge(checks)


def check_backward(
    grad_c: np.ndarray,
    argmax: np.ndarray,
    grad_a: np.ndarray,
    grad_b: np.ndarray,
    *,
    rng: np.random.Generator,
    count: int = 48,
) -> Check:
    """grad_A[i, k] = sum_j grad_C[i, j] [argmax[i, j] == k], likewise grad_B, on sampled rows and columns."""
    k = grad_a.shape[1]
    rtol = 1e-4 if grad_a.dtype == np.float32 else 1e-10
    atol = rtol * max(1.0, float(np.abs(grad_c).max(initial=0.0)))  # sums in any order: allow rounding
    checks = []
    for i in sample(grad_c.shape[0], count, rng):
        want = np.bincount(argmax[i].astype(np.int64), weights=grad_c[i].astype(np.float64), minlength=k)
        checks.append(_compare(grad_a[i], want, f"grad_A row {i} ", rtol=rtol, atol=atol))
    for j in sample(grad_c.shape[1], count, rng):
        want = np.bincount(argmax[:, j].astype(np.int64), weights=grad_c[:, j].astype(np.float64), minlength=k)
        checks.append(_compare(grad_b[:, j], want, f"grad_B column {j} ", rtol=rtol, atol=atol))
    return _merge(checks)

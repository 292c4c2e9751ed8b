"""NumPy reference of the tropical GEMM family: the contract the kernels are tested against.

It walks k in ascending order with the kernels' own rules (strict comparison,
NaN products never win, saturating integer products with absorbing
infinities), so its results, argmax included, equal the GPU's bit for bit. It
is also the CPU fallback of :func:`lazykern.tropical.matmul` for NumPy inputs
where there is no GPU. Memory: O(M*N) per step, one step per k.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

SEMIRINGS = ("maxplus", "minplus", "maxmul")
DTYPES = (np.dtype("float32"), np.dtype("float64"), np.dtype("int32"), np.dtype("int64"))


def check_semiring(semiring: object) -> str:
    if semiring not in SEMIRINGS:
        raise ValueError(f"semiring must be one of {SEMIRINGS}, got {semiring!r}")
    return semiring


def check_dtype(dtype: np.dtype, what: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        raise TypeError(f"{what} has dtype {dtype}; tropical products support float32, float64, int32 and int64")
    return dtype


def zero(semiring: str, dtype: np.dtype[Any]) -> Any:
    """The semiring zero: what an empty max/min (K == 0) gives."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(np.inf if semiring == "minplus" else -np.inf)
    if dtype.kind == "O":  # Python ints (exact tensor networks on the host): a float infinity compares with them
        return float("inf") if semiring == "minplus" else float("-inf")
    info = np.iinfo(dtype)
    return dtype.type(info.max if semiring == "minplus" else info.min)


def product(semiring: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise tropical product a (x) b with the kernels' rules (broadcasting)."""
    dtype = np.result_type(a, b)
    if dtype.kind in "fO":  # floats, or Python ints (no range to saturate at)
        with np.errstate(invalid="ignore", over="ignore"):
            out: np.ndarray = a * b if semiring == "maxmul" else a + b
        if semiring == "maxmul" and dtype.kind == "f":
            out = _float_times(a, b, out)
        return out
    info = np.iinfo(dtype)
    lo, hi = dtype.type(info.min), dtype.type(info.max)
    a, b = np.broadcast_arrays(np.asarray(a, dtype), np.asarray(b, dtype))
    if semiring == "maxmul":
        exact = _int_exact(a, b, np.multiply, dtype)
        a_inf, b_inf = a == hi, b == hi
        other = np.where(a_inf, b, a)
        out = np.where(a_inf | b_inf, np.where(other > 0, hi, lo), exact)
        return np.where((a == lo) | (b == lo), lo, out).astype(dtype)
    exact = _int_exact(a, b, np.add, dtype)
    absorb, other_inf = (hi, lo) if semiring == "minplus" else (lo, hi)
    out = np.where((a == other_inf) | (b == other_inf), other_inf, exact)
    return np.where((a == absorb) | (b == absorb), absorb, out).astype(dtype)


def _float_times(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Float max-times' product ``out = a * b`` made a semiring's: the zero -inf absorbs (IEEE gives
    -inf * -inf = +inf, -inf * 0 = NaN) and 0 * +inf = 0 (IEEE: NaN), so that max distributes over it
    on nonnegative values with infinities; a NaN operand keeps its NaN (it never wins)."""
    a, b = np.asarray(a), np.asarray(b)
    unset = np.isnan(out) & ~np.isnan(a) & ~np.isnan(b)  # 0 * inf
    absorbed = (a == -np.inf) | (b == -np.inf)
    if not (unset.any() or absorbed.any()):
        return out
    fixed = np.where(unset, out.dtype.type(0), out)
    return np.where(absorbed, out.dtype.type(-np.inf), fixed).astype(out.dtype, copy=False)


def _int_exact(a: np.ndarray, b: np.ndarray, op: Callable[[Any, Any], Any], dtype: np.dtype[Any]) -> np.ndarray:
    """op(a, b) saturated to dtype's range, computed exactly (int64 or Python ints)."""
    info = np.iinfo(dtype)
    if dtype.itemsize < 8:
        wide = op(a.astype(np.int64), b.astype(np.int64))
    else:
        wide = op(a.astype(object), b.astype(object))
    clipped: np.ndarray = np.clip(wide, info.min, info.max).astype(dtype)
    return clipped


def matmul(A: np.ndarray, B: np.ndarray, semiring: str = "maxplus", argmax: bool = False) -> Any:
    """C[i, j] = (+)_k A[i, k] (x) B[k, j]; with argmax=True also the int32 winning k.

    >>> A = np.array([[0.0, 1.0]]); B = np.array([[2.0], [0.0]])
    >>> matmul(A, B, "maxplus", argmax=True)
    (array([[2.]]), array([[0]], dtype=int32))
    """
    semiring = check_semiring(semiring)
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"reference.matmul needs 2-D A and B, got A.ndim={A.ndim}, B.ndim={B.ndim}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"shape mismatch: A is {A.shape}, B is {B.shape}; A.shape[1] must equal B.shape[0]")
    if A.dtype != B.dtype:
        raise TypeError(f"A is {A.dtype} but B is {B.dtype}; convert one so both have the same dtype")
    dtype = check_dtype(A.dtype, "A")
    M, K = A.shape
    N = B.shape[1]
    acc = np.full((M, N), zero(semiring, dtype), dtype=dtype)
    idx = np.full((M, N), 0 if K > 0 else -1, dtype=np.int32)
    minimize = semiring == "minplus"
    for k in range(K):
        p = product(semiring, A[:, k, None], B[None, k, :])
        with np.errstate(invalid="ignore"):
            better = p < acc if minimize else p > acc  # NaN never compares true: it never wins
        acc = np.where(better, p, acc)
        if argmax:
            idx[better] = k
    return (acc, idx) if argmax else acc


def _batch_view(X: np.ndarray, name: str) -> np.ndarray:
    if X.ndim == 2:
        return X[None]
    if X.ndim != 3:
        raise ValueError(f"bmm needs 2-D or 3-D {name}, got {name}.ndim={X.ndim}")
    return X


def bmm(A: np.ndarray, B: np.ndarray, semiring: str = "maxplus", argmax: bool = False) -> Any:
    """Batched matmul of (b, m, k) x (b, k, n); a 2-D operand is shared by every batch."""
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim == 2 and B.ndim == 2:
        raise ValueError("bmm needs at least one 3-D operand (use matmul for two 2-D ones)")
    A3, B3 = _batch_view(A, "A"), _batch_view(B, "B")
    batch = A3.shape[0] if A.ndim == 3 else B3.shape[0]  # a 2-D operand broadcasts, even to batch 0
    if A.ndim == 3 and B.ndim == 3 and A3.shape[0] != B3.shape[0]:
        raise ValueError(f"batch mismatch: A has {A3.shape[0]} matrices, B has {B3.shape[0]}")
    if A3.shape[2] != B3.shape[1]:
        raise ValueError(f"shape mismatch: A is {A.shape}, B is {B.shape}; A's last dim must equal B's rows")
    outs = [matmul(A3[b if A.ndim == 3 else 0], B3[b if B.ndim == 3 else 0], semiring, argmax) for b in range(batch)]
    M, N = A3.shape[1], B3.shape[2]
    if argmax:
        C = np.stack([o[0] for o in outs]) if outs else np.empty((0, M, N), A.dtype)
        K = np.stack([o[1] for o in outs]) if outs else np.empty((0, M, N), np.int32)
        return C, K
    return np.stack(outs) if outs else np.empty((0, M, N), A.dtype)


def matmul_backward(
    grad_C: np.ndarray, argmax: np.ndarray, A_shape: Sequence[int], B_shape: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """grad_A[.., i, k] = sum_j grad_C[.., i, j] [argmax == k]; grad_B likewise, summed over
    the batch for a broadcast (2-D) operand. Indices outside [0, K) contribute nothing."""
    grad_C, argmax = np.asarray(grad_C), np.asarray(argmax)
    if grad_C.shape != argmax.shape:
        raise ValueError(f"grad_C {grad_C.shape} and argmax {argmax.shape} must have the same shape")
    if grad_C.dtype.kind != "f":
        raise TypeError(f"grad_C must be float32 or float64, got {grad_C.dtype}")
    A_shape, B_shape = tuple(A_shape), tuple(B_shape)
    K = A_shape[-1]
    gC3 = grad_C if grad_C.ndim == 3 else grad_C[None]
    I3 = argmax if argmax.ndim == 3 else argmax[None]
    gA = np.zeros((gC3.shape[0], gC3.shape[1], K), grad_C.dtype)
    gB = np.zeros((gC3.shape[0], K, gC3.shape[2]), grad_C.dtype)
    b, i, j = np.nonzero((I3 >= 0) & (I3 < K))
    k = I3[b, i, j]
    np.add.at(gA, (b, i, k), gC3[b, i, j])
    np.add.at(gB, (b, k, j), gC3[b, i, j])
    gA = gA.reshape(A_shape) if len(A_shape) == 3 else gA.sum(axis=0)
    gB = gB.reshape(B_shape) if len(B_shape) == 3 else gB.sum(axis=0)
    return gA.astype(grad_C.dtype, copy=False), gB.astype(grad_C.dtype, copy=False)

"""The few array operations tropical einsum needs, for NumPy, CuPy and torch alike.

Layout changes (permute, reshape, diagonal, index) are views where the library can
make them and copies where it must; every number crunched goes through the
tropical products (:mod:`lazykern.tropical.api` or the NumPy kernels). Numba device
arrays are wrapped zero-copy as CuPy arrays (or torch tensors) for layout work and
handed back as Numba arrays at the end.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

log = logging.getLogger("lazykern")

DEFAULT_HOST_LIMIT = 2**28  # entries of the largest intermediate on the CPU (1 GiB of float32)


class Backend:
    """Layout operations of one array library (``name``: numpy, cupy or torch)."""

    def __init__(self, name: str, module: Any, back_to_numba: bool = False) -> None:
        self.name = name
        self.xp = module
        self.back_to_numba = back_to_numba

    @property
    def on_host(self) -> bool:
        return self.name == "numpy"

    def permute(self, x: Any, perm: tuple[int, ...]) -> Any:
        return x.permute(*perm) if self.name == "torch" else x.transpose(perm)

    def reshape(self, x: Any, shape: tuple[int, ...]) -> Any:
        return x.reshape(shape)

    def strides(self, x: Any) -> tuple[int, ...]:
        """Strides in elements."""
        if self.name == "torch":
            return tuple(x.stride())
        return tuple(s // x.itemsize for s in x.strides)

    def contiguous(self, x: Any) -> Any:
        return x.contiguous() if self.name == "torch" else self.xp.ascontiguousarray(x)

    def diagonal(self, x: Any, a: int, b: int) -> Any:
        """The diagonal of axes a < b, as the last axis (a view)."""
        return self.xp.diagonal(x, 0, a, b)

    def full(self, like: Any, shape: tuple[int, ...], value: Any, dtype: Any = None) -> Any:
        if self.name == "torch":
            return self.xp.full(shape, value, dtype=like.dtype if dtype is None else dtype, device=like.device)
        return self.xp.full(shape, value, dtype=like.dtype if dtype is None else dtype)

    def empty(self, like: Any, shape: tuple[int, ...]) -> Any:
        """A new C-contiguous array of ``like``'s dtype and device."""
        if self.name == "torch":
            return self.xp.empty(shape, dtype=like.dtype, device=like.device)
        return self.xp.empty(shape, dtype=like.dtype)

    def dtype(self, x: Any) -> np.dtype:
        if self.name == "torch":
            return np.dtype(str(x.dtype).removeprefix("torch."))
        dtype: np.dtype = np.dtype(x.dtype)
        return dtype

    def select(self, x: Any, axis: int, i: int) -> Any:
        index = (slice(None),) * axis + (i,)
        return x[index]

    def item(self, x: Any, index: tuple[int, ...] = ()) -> Any:
        v = x[index] if index else x
        if self.name == "torch":
            return v.item()
        return v.item() if hasattr(v, "item") else v

    def fmax(self, a: Any, b: Any, minimize: bool) -> Any:
        """Elementwise semiring sum of two slices' results (NaN ignored)."""
        return (self.xp.fmin if minimize else self.xp.fmax)(a, b)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self.xp.where(cond, a, b)

    def free_bytes(self) -> int | None:
        """Device memory this library could still hand out (its own pool's spare blocks included);
        None on the host."""
        if self.on_host:
            return None
        try:
            if self.name == "torch":
                free, _ = self.xp.cuda.mem_get_info()
                return int(free) + int(self.xp.cuda.memory_reserved() - self.xp.cuda.memory_allocated())
            free, _ = self.xp.cuda.runtime.memGetInfo()
            return int(free) + int(self.xp.get_default_memory_pool().free_bytes())
        except (AttributeError, RuntimeError) as exc:  # no device answered: plan as on the host
            log.debug("tropical: free device memory unknown (%s); slicing target as on the host", exc)
            return None

    def memory_limit(self, entry_bytes: int) -> int:
        """Default slicing target, entries of the largest intermediate: the largest power of two such
        that four arrays of that size (two operands, the result, one layout copy) fit in the free
        device memory; DEFAULT_HOST_LIMIT on the host."""
        free = self.free_bytes()
        if free is None:
            return DEFAULT_HOST_LIMIT
        entries = max(free // (4 * max(entry_bytes, 1)), 1)
        return 1 << (entries.bit_length() - 1)

    def wrap_result(self, x: Any) -> Any:
        if self.back_to_numba:
            from numba import cuda

            return cuda.as_cuda_array(x)
        return x


def backend_of(x: Any) -> tuple[Backend, Any]:
    """(backend, x as that backend's array) for one operand."""
    if isinstance(x, np.ndarray) or np.isscalar(x):
        return Backend("numpy", np), np.asarray(x)
    module = type(x).__module__
    if module.startswith("torch"):
        import torch

        return Backend("torch", torch), x
    if module.startswith("cupy"):
        import cupy

        return Backend("cupy", cupy), x
    if hasattr(x, "__cuda_array_interface__"):
        return _wrap_cai(x)
    raise TypeError(
        f"tropical.einsum operands must be NumPy, CuPy or Numba arrays or torch tensors; got {type(x).__name__}"
    )


def _wrap_cai(x: Any) -> tuple[Backend, Any]:
    try:
        import cupy

        return Backend("cupy", cupy, back_to_numba=True), cupy.asarray(x)
    except ImportError:
        pass
    try:
        import torch

        return Backend("torch", torch, back_to_numba=True), torch.as_tensor(x, device="cuda")
    except ImportError:
        raise TypeError(
            "tropical.einsum on Numba device arrays uses CuPy or torch for its layout changes (permutes, "
            "diagonals); install cupy-cuda12x/13x or torch, or pass CuPy arrays / torch tensors"
        ) from None

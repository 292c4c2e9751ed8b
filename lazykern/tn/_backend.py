"""The few array operations tropical einsum needs, for NumPy, CuPy and torch alike.

Layout changes (permute, reshape, diagonal, index) are views where the library can
make them and copies where it must; every number crunched goes through the
tropical products (:mod:`lazykern.tropical.api` or the NumPy kernels). Numba device
arrays are wrapped zero-copy as CuPy arrays (or torch tensors) for layout work and
handed back as Numba arrays at the end.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger("lazykern")

DEFAULT_HOST_LIMIT = 2**28  # entries of the largest intermediate on the CPU (1 GiB of float32)
# Bytes from which an array asked for ``whole`` (a counting sweep's boundary) is a device allocation of
# its own on CuPy, outside the pool (Backend._whole).
WHOLE_BYTES = 1 << 28
_CUDA_OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation


class Backend:
    """Layout operations of one array library (``name``: numpy, cupy or torch)."""

    def __init__(self, name: str, module: Any, back_to_numba: bool = False) -> None:
        self.name = name
        self.xp = module
        self.back_to_numba = back_to_numba
        # Every array of WHOLE_BYTES or more a device allocation of its own (:meth:`empty`, :meth:`product_out`):
        # set for an argmax run, whose kept choices, checkpoints and segments' choices live long beside
        # steps of every size. In the pool, a long-lived array cut out of a freed 16 GiB boundary held the
        # rest of that block: a 32 x 32 configuration on an H100 ran out of memory 16 GiB past its
        # predicted peak (allocation failed with 48 GiB in the pool where the plan had 32 alive).
        self.large_whole = False

    @property
    def on_host(self) -> bool:
        return self.name == "numpy"

    def permute(self, x: Any, perm: tuple[int, ...]) -> Any:
        return x.permute(*perm) if self.name == "torch" else x.transpose(perm)

    def reshape(self, x: Any, shape: tuple[int, ...]) -> Any:
        return x.reshape(shape)

    def strides(self, x: Any) -> tuple[int, ...]:
        """Strides in elements (read several times a step: ``map`` over the byte strides, no generator)."""
        if self.name == "torch":
            return tuple(x.stride())
        return tuple(map(x.itemsize.__rfloordiv__, x.strides))

    def contiguous(self, x: Any) -> Any:
        """A C-contiguous array of ``x``'s entries (``x`` itself when it is one). A GPU copy of a tensor
        whose axes hold 2 entries but one is one bit permutation (:mod:`._permute`), not the library's copy."""
        if self.is_contiguous(x):
            return x
        if not self.on_host and not getattr(x, "requires_grad", False):  # autograd follows the library's copy
            from . import _permute

            out = _permute.copy(self, x)
            if out is not None:
                return out
        return x.contiguous() if self.name == "torch" else self.xp.ascontiguousarray(x)

    def contiguous_parts(self, parts: Sequence[Any], alike: bool = False) -> tuple[Any, ...]:
        """:meth:`contiguous` of each part. On a GPU, parts of one shape and strides whose axes hold 2
        entries but one (an algebra's parts of one operand) are copied by one bit-permutation launch per dtype
        into one allocation (:func:`._permute.copy_parts`), not one launch and one allocation each.
        ``alike``: the caller has seen that the parts share shape and strides (not read again)."""
        if len(parts) > 1 and not self.on_host and not self.is_contiguous(parts[0]):
            if not any(getattr(p, "requires_grad", False) for p in parts):
                from . import _permute

                out = _permute.copy_parts(self, tuple(parts), alike)
                if out is not None:
                    return out
        return tuple(self.contiguous(p) for p in parts)

    def pointer(self, x: Any) -> int:
        """The device address of a GPU array's first entry, from the library's own attribute (the CUDA
        Array Interface builds a dict on every read, and one k-best step reads 18 addresses)."""
        if self.name == "torch":
            return int(x.data_ptr())
        return int(x.data.ptr)

    def is_contiguous(self, x: Any) -> bool:
        return bool(x.is_contiguous()) if self.name == "torch" else bool(x.flags.c_contiguous)

    def diagonal(self, x: Any, a: int, b: int) -> Any:
        """The diagonal of axes a < b, as the last axis (a view)."""
        return self.xp.diagonal(x, 0, a, b)

    def full(self, like: Any, shape: tuple[int, ...], value: Any, dtype: Any = None) -> Any:
        if self.name == "torch":
            return self.xp.full(shape, value, dtype=like.dtype if dtype is None else dtype, device=like.device)
        return self.xp.full(shape, value, dtype=like.dtype if dtype is None else dtype)

    def empty(self, like: Any, shape: tuple[int, ...], whole: bool = False) -> Any:
        """A new C-contiguous array of ``like``'s dtype and device. ``whole``: on CuPy, an array of
        WHOLE_BYTES or more is its own device allocation, outside the pool (:meth:`_whole`)."""
        if self.name == "torch":
            return self.xp.empty(shape, dtype=like.dtype, device=like.device)
        if (whole or self.large_whole) and self.name == "cupy" and self.xp is not np:  # not the host's GPU route
            nbytes = math.prod(shape) * self.dtype(like).itemsize
            if nbytes >= WHOLE_BYTES:
                return self._whole(like.dtype, shape, nbytes)
        return self.xp.empty(shape, dtype=like.dtype)

    def _whole(self, dtype: Any, shape: tuple[int, ...], nbytes: int) -> Any:
        """A CuPy array on a device allocation of its own (cudaMalloc; cudaFree when it dies). The pool
        would keep a freed block and cut smaller arrays out of it: on an H100 a 32 x 32 counting sweep
        at 12 bytes an entry found its freed 2^31-entry boundary held that way (part of each block in
        use, the rest too small for the next boundary) and ran out of memory 16 GiB beyond its exact
        peak. Out of memory, the pool's spare blocks go back to the device and it is tried once more."""
        cuda = self.xp.cuda
        try:
            memory = cuda.memory.Memory(nbytes)
        except cuda.runtime.CUDARuntimeError as exc:
            if getattr(exc, "status", None) != _CUDA_OUT_OF_MEMORY:
                raise
            pool = self.xp.get_default_memory_pool()
            pool.free_all_blocks()
            try:
                memory = cuda.memory.Memory(nbytes)
            except cuda.runtime.CUDARuntimeError as again:
                if getattr(again, "status", None) != _CUDA_OUT_OF_MEMORY:
                    raise
                raise cuda.memory.OutOfMemoryError(nbytes, int(pool.total_bytes()), 0) from again
        return self.xp.ndarray(shape, dtype=dtype, memptr=cuda.memory.MemoryPointer(memory, 0))

    def product_out(self, a: Any, b: Any, argmax: bool) -> Any:
        """The ``out=`` of a batched product of ``a`` (batch, M, K) and ``b`` (batch, K, N) on CuPy with
        :attr:`large_whole` set, when its result is WHOLE_BYTES or more: device allocations of their own
        (the values, and the int32 argmax beside them); None otherwise (the product allocates in the pool)."""
        if not self.large_whole or self.name != "cupy" or self.xp is np or a.ndim != 3 or b.ndim != 3:
            return None
        shape = (max(int(a.shape[0]), int(b.shape[0])), int(a.shape[1]), int(b.shape[2]))
        nbytes = math.prod(shape) * a.itemsize
        if nbytes < WHOLE_BYTES:
            return None
        values = self._whole(a.dtype, shape, nbytes)
        return (values, self._whole(np.dtype("int32"), shape, math.prod(shape) * 4)) if argmax else values

    def empty_parts(self, likes: Sequence[Any], shape: tuple[int, ...]) -> tuple[Any, ...]:
        """New C-contiguous arrays of ``shape``, one of each of ``likes``' dtypes (and device): the parts
        of one dtype are views of one allocation of them back to back, in their order (one allocation
        per dtype, not per part; the parts of one term live and die together)."""
        out: list[Any] = [None] * len(likes)
        runs: dict[np.dtype, list[int]] = {}
        for i, like in enumerate(likes):
            runs.setdefault(self.dtype(like), []).append(i)
        for at in runs.values():
            if len(at) == 1:
                out[at[0]] = self.empty(likes[at[0]], shape)
                continue
            block = self.empty(likes[at[0]], (len(at), *shape))
            for j, i in enumerate(at):
                out[i] = block[j]
        return tuple(out)

    def dtype(self, x: Any) -> np.dtype:
        if self.name == "torch":
            return np.dtype(str(x.dtype).removeprefix("torch."))
        dtype: np.dtype = np.dtype(x.dtype)
        return dtype

    def select(self, x: Any, axis: int, i: int) -> Any:
        index = (slice(None),) * axis + (i,)
        out = x[index]
        if self.on_host and x.dtype == object and not isinstance(out, np.ndarray):  # a 0-d pick: the Python int
            out = np.array(out, dtype=object)
        return out

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

    def spare_bytes(self) -> int:
        """Bytes of :meth:`free_bytes` that are this library's pool's spare blocks (0 on the host or
        where the library does not say)."""
        if self.on_host:
            return 0
        try:
            if self.name == "torch":
                return int(self.xp.cuda.memory_reserved() - self.xp.cuda.memory_allocated())
            return int(self.xp.get_default_memory_pool().free_bytes())
        except (AttributeError, RuntimeError):
            return 0

    def out_of_memory(self, exc: BaseException) -> bool:
        """Whether ``exc`` is this library's device allocation failure."""
        if self.on_host:
            return False
        if self.name == "torch":
            return isinstance(exc, self.xp.cuda.OutOfMemoryError)
        return isinstance(exc, self.xp.cuda.memory.OutOfMemoryError)

    def release_cached(self) -> None:
        """Hand the pool's spare blocks back to the device (before a large contraction: a pool that
        keeps freed blocks of other sizes would count against its budget)."""
        if self.on_host or self.xp is np:  # NumPy, or the GPU route run on the host: no pool
            return
        if self.name == "torch":
            self.xp.cuda.empty_cache()
        else:
            self.xp.get_default_memory_pool().free_all_blocks()

    def budget_bytes(self) -> int | None:
        """Bytes a contraction may fill: the device's free memory, or on the host the RAM available now
        (:func:`available_ram`; None where the machine does not say)."""
        free = self.free_bytes()
        return available_ram() if free is None and self.on_host else free

    @property
    def host_ram(self) -> bool:
        """Whether :meth:`budget_bytes` is the host's RAM, which the NumPy kernels' temporaries fill too."""
        return self.on_host and self.free_bytes() is None

    def memory_limit(self, entry_bytes: int) -> int:
        """Default slicing target, entries of the largest intermediate: the largest power of two such
        that four arrays of that size (two operands, the result, one layout copy) fit in the free
        device memory; on the host the same within the available RAM, and at most DEFAULT_HOST_LIMIT."""
        free = self.budget_bytes()
        if free is None:
            return DEFAULT_HOST_LIMIT
        entries = max(free // (4 * max(entry_bytes, 1)), 1)
        limit = 1 << (entries.bit_length() - 1)
        return min(limit, DEFAULT_HOST_LIMIT) if self.on_host else limit

    # -- several devices (tropical's ``devices=``): where an array lives, copies, the current device
    def device_of(self, x: Any) -> int | None:
        """The GPU ordinal holding ``x`` (None on the host)."""
        if self.on_host:
            return None
        return int(x.device.index) if self.name == "torch" else int(x.device.id)

    def to_device(self, x: Any, device: int | None) -> Any:
        """``x`` on GPU ``device`` (``x`` itself when it is there already; host arrays stay put)."""
        if self.on_host or device is None or self.device_of(x) == device:
            return x
        if self.name == "torch":
            return x.to(f"cuda:{device}")
        with self.xp.cuda.Device(device):
            return x.copy()  # CuPy copies onto the current device

    def to_host(self, x: Any) -> np.ndarray:
        if self.on_host:
            return np.asarray(x)
        host: np.ndarray = x.detach().cpu().numpy() if self.name == "torch" else self.xp.asnumpy(x)
        return host

    def from_host(self, x: np.ndarray) -> Any:
        """A host array as this library's array on its current device."""
        if self.on_host:
            return x
        return self.xp.as_tensor(x, device="cuda") if self.name == "torch" else self.xp.asarray(x)

    def on_device(self, device: int | None) -> contextlib.AbstractContextManager[Any]:
        """``with be.on_device(d):`` GPU ``d`` is current for lazykern's launches (its primary
        context) and for the library's own allocations and elementwise work; no-op on the host."""
        stack = contextlib.ExitStack()
        if self.on_host or device is None:
            return stack
        from ..launch import _device

        stack.enter_context(_device.on(device))
        stack.enter_context(self.xp.cuda.device(device) if self.name == "torch" else self.xp.cuda.Device(device))
        return stack

    def synchronize(self) -> None:
        """Wait for the current device's work (a partial read by another device's stream must be whole)."""
        if self.on_host:
            return
        if self.name == "torch":
            self.xp.cuda.synchronize()
        else:
            self.xp.cuda.Device().synchronize()

    def wrap_result(self, x: Any) -> Any:
        if self.back_to_numba:
            from numba import cuda

            return cuda.as_cuda_array(x)
        return x


def available_ram() -> int | None:
    """Bytes of RAM a new allocation can have without swapping: Linux's MemAvailable (page cache and
    reclaimable memory included), lowered to what this process's memory cgroup still allows (a container's
    limit, which MemAvailable does not show); psutil's figure elsewhere, None where neither answers. Read
    afresh on each call: other processes move it."""
    found = None
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    found = int(line.split()[1]) * 1024  # kB
                    break
    except (OSError, ValueError, IndexError):
        pass
    if found is None:
        try:
            psutil = importlib.import_module("psutil")  # optional: not a dependency
        except ImportError:
            return None
        return int(psutil.virtual_memory().available)
    room = _cgroup_room()
    return found if room is None else min(found, room)


_CGROUPS = (  # (limit, usage): cgroup v2, then v1
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


def _cgroup_room() -> int | None:
    """Bytes the memory cgroup's limit leaves above its usage; None with no limit (v2 "max", v1's huge
    sentinel) or no cgroup file."""
    for limit_file, usage_file in _CGROUPS:
        try:
            with open(limit_file) as f:
                limit = f.read().strip()
            with open(usage_file) as f:
                usage = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= 1 << 60:
            return None
        return max(int(limit) - usage, 0)
    return None


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

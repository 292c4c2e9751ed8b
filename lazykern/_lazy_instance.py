"""One signature of a ``@lazy_kernel``: its cubin per arch, loaded per context, and its launch plan.

The plan (stored with the cubin) says how arguments become parameters; from it come a
packer (one Python value per parameter, for ``cuda.core.launch``) and a filler that writes
the parameters straight into a reused block for ``cuLaunchKernel`` (the hot path).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, Protocol

from cuda.bindings import driver as _cu

from . import _device, _fork, _numba_args
from ._device import current_context
from .kernel import Kernel

# CUDA's launch "extra" keys (cuda.h: CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE).
_BUFFER_POINTER, _BUFFER_SIZE = 1, 2


class Owner(Protocol):
    """The lazy kernel an instance belongs to."""

    __qualname__: str
    _lock: Any

    def _entry(self, types: tuple, arch: str) -> tuple[Any, bool]: ...


class Instance:
    """One signature of a lazy kernel: its launch plan, its parameter block and its loaded
    functions, one per context."""

    __slots__ = (
        "owner", "types", "pack", "plan", "cooperative", "functions", "cufunctions", "kernels",
        "fill", "block", "extra", "block_lock", "_block_size", "_extra",
    )  # fmt: skip

    def __init__(self, owner: Owner, types: tuple) -> None:
        self.owner = owner
        self.types = types
        self.pack: Callable[..., tuple] | None = None
        self.plan: list | None = None
        self.cooperative = False
        self.functions: dict[int, Any] = {}  # CUcontext handle -> cuda.core kernel
        self.cufunctions: dict[int, Any] = {}  # CUcontext handle -> CUfunction (hot path)
        self.kernels: dict[str, Kernel] = {}  # arch -> loaded Kernel
        self.fill: Callable[..., None] | None = None
        self.block: Any = None  # the parameter block, reused: cuLaunchKernel copies it before returning
        self.extra = 0
        self.block_lock = _fork.lock()

    def function(self) -> Any:
        """The cuda.core kernel for the current context, fetched, compiled or loaded on first use."""
        from numba.cuda.cudadrv.devices import get_context

        ctx = get_context()  # creates the context if there is none yet
        fn = self.functions.get(current_context())
        if fn is None:
            fn = self._load(ctx)
        return fn

    def _load(self, ctx: Any) -> Any:
        arch = _device.arch(ctx.device.id)
        with self.owner._lock:
            kernel = self.kernels.get(arch)
            if kernel is None:
                entry, _ = self.owner._entry(self.types, arch)
                meta = entry.meta
                if self.pack is None:
                    self._set_plan(meta)
                kernel = self.kernels[arch] = Kernel(
                    self.owner.__qualname__, meta["symbol"], entry.code, arch=arch, meta=meta, family="lazy_kernel"
                )
            fn = kernel.function()
            handle = current_context()
            self.cufunctions[handle] = _cu.CUfunction(int(fn.handle))
            self.functions[handle] = fn
        return fn

    def _set_plan(self, meta: dict[str, Any]) -> None:
        self.plan = meta["plan"]
        self.cooperative = bool(meta.get("cooperative", False))
        size, self.fill = _numba_args.make_buffer_filler(self.plan)
        self.block = (ctypes.c_char * max(size, 1))()
        self._block_size = ctypes.c_size_t(size)
        self._extra = (ctypes.c_void_p * 5)(
            _BUFFER_POINTER, ctypes.addressof(self.block), _BUFFER_SIZE, ctypes.addressof(self._block_size), 0
        )
        self.extra = ctypes.addressof(self._extra)
        self.pack = _numba_args.make_packer(self.plan)

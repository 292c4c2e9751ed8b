"""One signature of a ``@lazy_kernel``: its cubin per arch, loaded per context, and its launch plan.

The plan (stored with the cubin) says how arguments become parameters; from it come a
packer (one Python value per parameter, for ``cuda.core.launch``) and a filler that writes
the parameters straight into a reused block for ``cuLaunchKernel`` (the hot path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from cuda.bindings import driver as _cu

from .. import _fork
from .._numba import args as _numba_args
from .._numba import internals
from ..errors import LaunchError
from ..launch import _device
from ..launch._device import current_context
from ..launch._launch import Params
from ..launch.kernel import Kernel


class Owner(Protocol):
    """The lazy kernel an instance belongs to."""

    __qualname__: str

    def _entry(self, types: tuple[Any, ...], arch: str) -> tuple[Any, bool]: ...


class Instance:
    """One signature of a lazy kernel: its launch plan, its parameter block and its loaded
    functions, one per context."""

    __slots__ = (
        "owner", "types", "pack", "plan", "cooperative", "functions", "cufunctions", "kernels",
        "fill", "params", "lock", "debug", "symbol", "carveout",
    )  # fmt: skip

    def __init__(self, owner: Owner, types: tuple[Any, ...]) -> None:
        self.owner = owner
        self.types = types
        self.pack: Callable[..., tuple[Any, ...]] | None = None
        self.plan: list[Any] | None = None
        self.cooperative = False
        self.debug: dict[str, Any] | None = None  # debug=True: the kernel's exception table
        self.symbol = ""
        self.carveout: int | None = None
        self.functions: dict[int, Any] = {}  # CUcontext handle -> cuda.core kernel
        self.cufunctions: dict[int, Any] = {}  # CUcontext handle -> CUfunction (hot path)
        self.kernels: dict[str, Kernel] = {}  # arch -> loaded Kernel
        self.fill: Callable[..., None] | None = None
        self.params: Params | None = None  # the parameter block, set with the plan
        self.lock = _fork.rlock()  # loading: one compile or load per arch and context

    def function(self) -> Any:
        """The cuda.core kernel for the current context, fetched, compiled or loaded on first use."""
        ctx = internals.context()  # creates the context if there is none yet
        fn = self.functions.get(current_context())
        if fn is None:
            fn = self._load(ctx)
        return fn

    def _load(self, ctx: Any) -> Any:
        arch = _device.arch(ctx.device.id)
        with self.lock:
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
            cufn = _cu.CUfunction(int(fn.handle))
            if self.carveout is not None:  # as numba-cuda: a preference set on the kernel, for this device
                attr = _cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
                kernel_handle = _cu.CUkernel(int(fn.handle))  # Numba loads cubins as libraries
                (err,) = _cu.cuKernelSetAttribute(attr, self.carveout, kernel_handle, ctx.device.id)
                if err != _cu.CUresult.CUDA_SUCCESS:
                    name = self.owner.__qualname__
                    raise LaunchError(f"{name}: shared_memory_carveout={self.carveout} refused by the driver: {err!r}")
            self.cufunctions[handle] = cufn
            self.functions[handle] = fn
        return fn

    def _set_plan(self, meta: dict[str, Any]) -> None:
        self.plan = meta["plan"]
        self.cooperative = bool(meta.get("cooperative", False))
        self.debug = meta.get("exceptions")
        self.symbol = meta.get("symbol", "")  # read by a debug=True launch only
        self.carveout = meta.get("carveout")
        _, self.fill = _numba_args.make_buffer_filler(self.plan)
        self.params = Params(_numba_args.struct_format(self.plan, packed_arrays=True))
        self.pack = _numba_args.make_packer(self.plan)

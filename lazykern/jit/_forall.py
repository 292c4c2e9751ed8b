"""``kernel.forall(ntasks)``: a 1-D launch of one thread per task, sized as numba-cuda sizes it.

numba-cuda's ``ForAll`` launches ``ceil(ntasks / tpb)`` blocks of ``tpb`` threads; with no ``tpb``
given, ``tpb`` is the block size its context reports for the kernel (:mod:`._occupancy`). The
simulator's ``forall`` launches ``ntasks`` blocks of one thread. Nothing is launched for 0 tasks.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..launch._device import current_context
from ..launch._device import simulating as _simulating
from . import _occupancy
from ._lazy_instance import Instance


class Owner(Protocol):
    """What ``forall`` needs of its ``LazyKernel``."""

    def __getitem__(self, config: Any) -> Any: ...

    def _instance_for(self, args: tuple[Any, ...]) -> Instance: ...


class ForAll:
    """A kernel configured for ``ntasks`` tasks; calling it launches."""

    __slots__ = ("kernel", "ntasks", "thread_per_block", "stream", "sharedmem")

    def __init__(self, kernel: Owner, ntasks: int, tpb: int = 0, stream: Any = 0, sharedmem: int = 0) -> None:
        if ntasks < 0:
            raise ValueError(f"Can't create ForAll with negative task count: {ntasks}")  # numba-cuda's words
        self.kernel = kernel
        self.ntasks = ntasks
        self.thread_per_block = tpb
        self.stream = stream
        self.sharedmem = sharedmem

    def __call__(self, *args: Any) -> None:
        if self.ntasks == 0:
            return
        if _simulating():
            self.kernel[self.ntasks, 1, self.stream, self.sharedmem](*args)
            return
        tpb = self.thread_per_block or self._block_size(args)
        grid = (self.ntasks + tpb - 1) // tpb
        self.kernel[grid, tpb, self.stream, self.sharedmem](*args)

    def _block_size(self, args: tuple[Any, ...]) -> int:
        inst = self.kernel._instance_for(args)
        inst.function()  # found, compiled or loaded in the current context
        return _occupancy.forall_block_size(inst.cufunctions[current_context()])

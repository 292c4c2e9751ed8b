"""A family made on first use and its kernels loaded once per device: what a module with its own family
(the tensor networks' k-best and top-two products) keeps per process.

:meth:`Loaded.kernel` asks the family once per (kernel, device) (the arch string normalized, a lock on a
miss), then answers from a dict: a contraction launches hundreds of steps. A forked child forgets the
loaded kernels (the parent's modules belong to the parent's contexts) and loads its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _fork
from ..launch import _device
from .family import KernelFamily


class Loaded:
    """The family ``make()`` returns, made on first use, and its kernels loaded per device."""

    def __init__(self, make: Callable[[], KernelFamily]) -> None:
        self._make = make
        self._family: KernelFamily | None = None
        self._kernels: dict[tuple[str, int | None], Any] = {}
        _fork.on_child(self._kernels.clear)

    def family(self) -> KernelFamily:
        """The process's family, made on first use."""
        if self._family is None:
            self._family = self._make()
            self._kernels.clear()
        return self._family

    def kernel(self, name: str, device: int | None) -> Any:
        """The loaded kernel ``name`` for ``device``."""
        found = self._kernels.get((name, device))
        if found is None:
            found = self._kernels[(name, device)] = self.family().get(name, arch=_device.arch(device))
        return found

    def launch(self, name: str, at: Any, stream: Any, blocks: int, threads: int, args: tuple[Any, ...]) -> None:
        """Launch ``name`` on the device ``at`` names (None: the current one), on ``stream`` (None: the
        default), with that device current while it is queued."""
        device = _device.resolve_or_current(at)
        with _device.on(device):
            self.kernel(name, device)[(blocks,), (threads,), stream or 0](*args)

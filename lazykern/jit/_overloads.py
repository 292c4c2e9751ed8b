"""``kernel.overloads[sig]``: one signature of a ``@lazy_kernel`` as numba-cuda's ``_Kernel`` shows it.

What the binary answers (occupancy, registers, shared / local / constant memory, SASS) is read
from the cubin the store holds, loaded in the current context: nothing is compiled twice. What
only Numba's compile holds (the typed IR, LLVM IR, PTX) is compiled on demand for the arch asked,
once per process, and never stored (:func:`lazykern._numba.compile.lowered`).
"""

from __future__ import annotations

import sys
import types as pytypes
from collections.abc import Iterator, Mapping
from typing import IO, Any, Protocol

from .._numba import compile as _numba_compile
from .._numba import internals
from .._numba.signature import normalize_signature
from ..compile import compiler
from ..launch import _device
from ..launch._device import current_context
from . import _occupancy
from ._lazy_instance import Instance


class Owner(Protocol):
    """What an overload needs of its ``LazyKernel``."""

    py_func: Any
    link: tuple[Any, ...]

    @property
    def _compile_options(self) -> dict[str, Any]: ...

    def _entry(self, types: tuple[Any, ...], arch: str) -> tuple[Any, bool]: ...

    def _instance(self, types: tuple[Any, ...]) -> Instance: ...

    def _known_signatures(self) -> list[tuple[Any, ...]]: ...

    def _lowered(self, types: tuple[Any, ...], arch: str) -> Any: ...


class Overload:
    """One instantiation: numba-cuda's ``_Kernel`` attributes and methods that the docs use."""

    def __init__(self, owner: Owner, types: tuple[Any, ...]) -> None:
        self._owner = owner
        self.argument_types = types

    @property
    def signature(self) -> Any:
        from numba.cuda import types

        return types.void(*self.argument_types)

    def _cufunction(self) -> Any:
        inst = self._owner._instance(self.argument_types)
        inst.function()  # found, compiled or loaded in the current context
        return inst.cufunctions[current_context()]

    def _arch(self) -> str:
        return _device.arch(internals.context().device.id)

    @property
    def entry_name(self) -> str:
        """The kernel's mangled symbol (as stored with its cubin)."""
        entry, _ = self._owner._entry(self.argument_types, self._arch())
        return str(entry.meta["symbol"])

    def max_cooperative_grid_blocks(self, blockdim: Any, dynsmemsize: int = 0) -> int:
        """The most blocks of ``blockdim`` a cooperative launch can run at once on the current device."""
        cufunc = self._cufunction()
        return _occupancy.max_cooperative_grid_blocks(cufunc, internals.context().device.id, blockdim, dynsmemsize)

    @property
    def regs_per_thread(self) -> int:
        return _occupancy.function_attribute(self._cufunction(), "NUM_REGS")

    @property
    def const_mem_size(self) -> int:
        return _occupancy.function_attribute(self._cufunction(), "CONST_SIZE_BYTES")

    @property
    def shared_mem_per_block(self) -> int:
        return _occupancy.function_attribute(self._cufunction(), "SHARED_SIZE_BYTES")

    @property
    def max_threads_per_block(self) -> int:
        return _occupancy.function_attribute(self._cufunction(), "MAX_THREADS_PER_BLOCK")

    @property
    def local_mem_per_thread(self) -> int:
        return _occupancy.function_attribute(self._cufunction(), "LOCAL_SIZE_BYTES")

    def inspect_llvm(self, arch: str | tuple[int, int] | None = None) -> str:
        """The LLVM IR Numba generates (compiled on demand; ``arch`` defaults to the current device's)."""
        return str(self._lowered(arch).library.get_llvm_str())

    def inspect_asm(self, cc: Any = None) -> str:
        """The PTX for compute capability ``cc`` (a tuple or ``"sm_XY"``; the current device's by default)."""
        arch = compiler.normalize_arch(cc) if cc is not None else self._arch()
        return str(self._lowered(arch).library.get_asm_str(cc=_numba_compile.arch_to_cc(arch)))

    def inspect_sass(self, arch: str | tuple[int, int] | None = None) -> str:
        """The SASS of the stored cubin, through numba-cuda's disassembler (nvdisasm must be on the PATH)."""
        arch = compiler.normalize_arch(arch) if arch is not None else self._arch()
        entry, _ = self._owner._entry(self.argument_types, arch)
        return internals.disassemble_cubin(bytes(entry.code))

    def inspect_types(self, file: IO[str] | None = None, arch: str | tuple[int, int] | None = None) -> None:
        """Numba's typed IR of this instantiation, printed as numba-cuda's ``_Kernel.inspect_types`` prints it."""
        cres = self._lowered(arch)
        out = sys.stdout if file is None else file
        print(f"{cres.fndesc.llvm_func_name} {self.argument_types}", file=out)
        print("-" * 80, file=out)
        print(cres.type_annotation, file=out)
        print("=" * 80, file=out)

    def _lowered(self, arch: str | tuple[int, int] | None) -> Any:
        arch = compiler.normalize_arch(arch) if arch is not None else self._arch()
        return self._owner._lowered(self.argument_types, arch)

    def __repr__(self) -> str:
        return f"<lazy_kernel overload {self.signature}>"


class Overloads(Mapping[tuple[Any, ...], Overload]):
    """``kernel.overloads``: signature (a tuple of Numba types, as numba-cuda keys it) -> overload,
    for the declared signatures and those instantiated in this process; a key may also be spelled
    as a signature string or object."""

    def __init__(self, owner: Owner) -> None:
        self._owner = owner

    def __getitem__(self, key: Any) -> Overload:
        try:
            types = normalize_signature(key)
        except TypeError:
            raise KeyError(key) from None
        if types not in self._owner._known_signatures():
            raise KeyError(key)
        return Overload(self._owner, types)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._owner._known_signatures())

    def __len__(self) -> int:
        return len(self._owner._known_signatures())


class SimOverloads(dict[Any, Any]):
    """Under the simulator, as numba-cuda's ``FakeOverloadDict``: every key is an overload whose
    cooperative grid holds one block (the simulator cannot synchronize blocks)."""

    def __getitem__(self, key: Any) -> Any:
        return pytypes.SimpleNamespace(max_cooperative_grid_blocks=lambda blockdim, dynsmemsize=0: 1)

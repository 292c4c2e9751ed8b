"""One Numba-Python kernel instantiation -> cubin, for any arch, with no GPU needed.

This follows what numba-cuda 0.30's ``_Kernel.__init__`` does (type, lower,
fix the kernel up, link any files), but takes the compute capability as an
argument instead of asking the current device, and returns the cubin bytes,
the mangled symbol and the launch plan instead of a loaded module. Linked
CUDA C++ (``link=`` files, ``CUSource``, ``cuda.declare_device(link=...)``)
goes through numba-cuda's NVRTC + linker route; numba-cuda's own cache
refuses such kernels, the lazykern cache stores them like any other.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
import types as pytypes
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from .. import _fork
from ..compile._manifest import start_ns
from ..errors import CompileError
from . import args as _numba_args
from . import debug as _debug
from . import internals, key, linked, resolved

log = logging.getLogger("lazykern")

# Helpers numba-cuda links in when the generated code calls them (see _Kernel.__init__).
_RESHAPE_FUNCS = ("nocopy_empty_reshape", "numba_attempt_nocopy_reshape")


@_fork.on_child
def _reset_numba_compiler_lock() -> None:
    # A parent thread compiling at fork() time leaves Numba's global compiler lock held in the child.
    # numba-cuda's global_compiler_lock pairs its own lock (_cuda_lock) with upstream Numba's (_numba_lock).
    for name in ("numba.cuda.core.compiler_lock", "numba.core.compiler_lock"):
        lock = getattr(sys.modules.get(name), "global_compiler_lock", None)
        for part in (lock, getattr(lock, "_cuda_lock", None), getattr(lock, "_numba_lock", None)):
            held = getattr(part, "_lock", None)
            if held is not None:
                held._at_fork_reinit()


def arch_to_cc(arch: str) -> tuple[int | str, ...]:
    """``"sm_90"`` -> ``(9, 0)``; ``"sm_90a"`` -> ``(9, 0, "a")``."""
    digits = arch[3:].rstrip("af")
    suffix = arch[3 + len(digits) :]
    cc = (int(digits[:-1]), int(digits[-1]))
    return (*cc, suffix) if suffix else cc


def compile_kernel(
    pyfunc: Any,
    argtypes: tuple[Any, ...],
    *,
    arch: str,
    options: dict[str, Any],
    link: Sequence[Any] = (),
) -> tuple[bytes, dict[str, Any]]:
    """Compile ``pyfunc`` for ``argtypes``; return ``(cubin, JSON-able metadata)``."""
    name = getattr(pyfunc, "__qualname__", repr(pyfunc))
    plan = _numba_args.plan_for(argtypes)
    cc = arch_to_cc(arch)
    start = time.perf_counter()
    started = start_ns()  # a linked file's header changed after this is not trusted
    at_start = linked.anchors()  # the directories above its search path: replaced, not merely touched
    internals.forget_file_reads()  # linked files are read as they are now, as the key read them
    debug = bool(options["debug"])
    with _compile_errors(name, argtypes, arch, options):
        cres, manifest, n_params = _lower(pyfunc, argtypes, cc, options, link, record=True)
        lib = cres.library
        symbol = cres.fndesc.llvm_func_name
        cubin = lib.get_cubin(cc=cc)
    if n_params != _numba_args.param_count(plan):
        raise CompileError(
            f"kernel {name} has {n_params} parameters but its launch plan packs "
            f"{_numba_args.param_count(plan)}; this numba-cuda version lays arguments out "
            "differently from what lazy_kernel supports",
            name=name,
            arch=arch,
        )
    code = bytes(getattr(cubin, "code", cubin))
    manifest["linked"], why = linked.record(linked.cuda_sources(key.linked_items(pyfunc, link)), started, at_start)
    if why and not manifest.get("memory_only"):
        manifest["memory_only"] = why
    meta = {
        "kind": "numba-kernel",
        "family": "lazy_kernel",
        "name": name,
        "symbol": symbol,
        "plan": plan,
        "signature": [str(t) for t in argtypes],
        "arch": arch,
        "cooperative": bool(lib.use_cooperative),
        "carveout": carveout(options.get("shared_memory_carveout")),
        "compile_seconds": round(time.perf_counter() - start, 6),
        "manifest": manifest,
    }
    if debug:  # the launch reads the kernel's error code and raises what the Python code raised
        meta["exceptions"], unpersistable = _debug.exception_table(cres.call_helper)
        if unpersistable:
            meta["memory_only"] = unpersistable
    # What a new process could not verify is not persisted: it runs from memory (cache.py).
    if not meta.get("memory_only") and (manifest.get("memory_only") or manifest.get("unverifiable")):
        meta["memory_only"] = manifest.get("memory_only") or f"cannot be verified by name: {manifest['unverifiable']}"
    log.debug("compiled lazy kernel %s%s for %s", name, meta["signature"], arch)
    return code, meta


def lowered(
    pyfunc: Any, argtypes: tuple[Any, ...], *, arch: str, options: dict[str, Any], link: Sequence[Any] = ()
) -> Any:
    """Numba's compile result of one instantiation for ``arch``, lowered as :func:`compile_kernel`
    lowers it and not linked: what ``inspect_types`` / ``inspect_llvm`` / ``inspect_asm`` read
    (``type_annotation``, ``library.get_llvm_str()``, ``library.get_asm_str(cc)``)."""
    name = getattr(pyfunc, "__qualname__", repr(pyfunc))
    with _compile_errors(name, argtypes, arch, options):
        cres, _, _ = _lower(pyfunc, argtypes, arch_to_cc(arch), options, link, record=False)
    return cres


def _lower(
    pyfunc: Any, argtypes: tuple[Any, ...], cc: tuple[int | str, ...], options: dict[str, Any],
    link: Sequence[Any], *, record: bool,
) -> tuple[Any, dict[str, Any], int]:  # fmt: skip
    """Type and lower ``pyfunc`` as numba-cuda's ``_Kernel`` does, make it a kernel and add its
    links: ``(compile result, manifest of what Numba resolved (with ``record``), parameter count)``."""
    from numba.cuda import types
    from numba.cuda.compiler import compile_cuda, kernel_fixup
    from numba.cuda.cudadrv import nvvm

    debug = bool(options["debug"])
    nvvm_options: dict[str, Any] = {"fastmath": options["fastmath"], "opt": 3 if options["opt"] else 0}
    if debug:
        nvvm_options["g"] = None  # as numba-cuda's _Kernel: full debug info
    manifest: dict[str, Any] = {}
    with _target_cc(cc):
        cres = compile_cuda(
            pyfunc,
            types.void,
            argtypes,
            debug=debug,
            lineinfo=options["lineinfo"],
            forceinline=options["forceinline"],
            inline=options["inline"],
            fastmath=options["fastmath"],
            nvvm_options=nvvm_options,
            cc=cc,
            max_registers=options["max_registers"],
            lto=options["lto"],
        )
        if record:  # while this compile's device-function overloads are in place: what Numba resolved
            manifest = resolved.record(cres, pyfunc, lines=key.lines_compiled(options))
    lib = cres.library
    symbol = cres.fndesc.llvm_func_name
    kernel = lib.get_function(symbol)
    lib._entry_name = symbol
    kernel_fixup(kernel, debug)
    nvvm.set_launch_bounds(kernel, options["launch_bounds"])
    _add_links(lib, link, cres.target_context)
    if lib.use_cooperative:
        lib.needs_cudadevrt = True
    return cres, manifest, len(kernel.args)


@contextlib.contextmanager
def _compile_errors(name: str, argtypes: tuple[Any, ...], arch: str, options: dict[str, Any]) -> Iterator[None]:
    """Numba's exceptions as one CompileError naming the kernel, signature, arch and options."""
    try:
        yield
    except CompileError:
        raise
    except Exception as exc:
        raise CompileError(
            f"Numba could not compile {name} for {tuple(str(t) for t in argtypes)}: {exc}",
            name=name,
            arch=arch,
            options=[f"{k}={v}" for k, v in sorted(options.items())],
            log=str(exc),
        ) from exc


@contextlib.contextmanager
def _target_cc(cc: tuple[int | str, ...]) -> Iterator[None]:
    """Make Numba compile called device functions for ``cc``, without asking the driver.

    numba-cuda's device-function dispatcher reads ``get_current_device().compute_capability``
    (which needs a driver: ahead-of-time compiling must not) and keeps one compiled overload
    per argument types whatever the arch. Here each device function gets an overload compiled
    for ``cc`` (kept per arch), and Numba's own overloads are put back afterwards. Numba's
    global compiler lock (reentrant, taken by every compile) keeps other threads out meanwhile.
    """
    from numba.cuda import dispatcher
    from numba.cuda.core.compiler_lock import global_compiler_lock

    target = tuple(cc[:2])
    stand_in = pytypes.SimpleNamespace(compute_capability=target)
    cls = dispatcher.CUDADispatcher
    real_compile = cls.compile_device
    displaced: list[tuple[Any, Any, Any]] = []  # (dispatcher, argument types, Numba's overload or None)

    def compile_device(self: Any, args: Any, return_type: Any = None) -> Any:
        per_arch = _overloads_by_arch.setdefault(self, {})
        mine = per_arch.get((target, args))
        if self.overloads.get(args) is not mine or mine is None:
            displaced.append((self, args, self.overloads.pop(args, None)))
        if mine is None:
            mine = per_arch[(target, args)] = real_compile(self, args, return_type)
        else:
            self.overloads[args] = mine
            mine.target_context.insert_user_function(mine.entry_point, mine.fndesc, [mine.library])
        return mine

    with global_compiler_lock:
        real_device = dispatcher.get_current_device
        dispatcher.get_current_device = lambda: stand_in
        cls.compile_device = compile_device
        try:
            yield
        finally:
            cls.compile_device = real_compile
            dispatcher.get_current_device = real_device
            for disp, args, theirs in reversed(displaced):
                if theirs is None:
                    disp.overloads.pop(args, None)  # Numba compiles its own on next use
                else:
                    disp.overloads[args] = theirs
                    theirs.target_context.insert_user_function(theirs.entry_point, theirs.fndesc, [theirs.library])


# Device-function overloads compiled by _target_cc, per dispatcher and (arch, argument types).
_overloads_by_arch: weakref.WeakKeyDictionary[Any, dict[tuple[Any, Any], Any]] = weakref.WeakKeyDictionary()


def _add_links(lib: Any, link: Sequence[Any], target_context: Any) -> None:
    """Add the user's files and the helpers Numba links on demand; refuse what needs Numba's loader."""
    from numba.cuda.dispatcher import _Kernel

    for item in link:
        lib.add_linking_file(item)
    llvm = lib.get_llvm_str()
    if any(fn in llvm for fn in _RESHAPE_FUNCS):
        lib.add_linking_file(os.path.join(internals.package_dir(), "reshape_funcs.cu"))
    if getattr(target_context, "enable_nrt", False) and any(fn in llvm for fn in _Kernel.NRT_functions):
        raise CompileError(
            "this kernel needs Numba's runtime (NRT), which must be set up by Numba's own module loader; "
            "use numba.cuda.jit for it or turn NUMBA_CUDA_ENABLE_NRT off",
            name=str(lib._entry_name),
        )
    for f in lib._linking_files:
        setup, teardown = getattr(f, "setup_callback", None), getattr(f, "teardown_callback", None)
        if setup is not None and internals.is_fp16_lto_warning(setup) and teardown is None:
            # numba-cuda's float16 shim: its only callback warns once when nvJitLink is missing
            # (float16 is slow without LTO); it touches no module, so warn here, at compile time.
            setup(None)
        elif setup is not None or teardown is not None:
            raise CompileError(
                f"linked code {getattr(f, 'name', f)!r} has setup/teardown callbacks, which run on "
                "Numba's own loaded module; lazy_kernel loads cubins itself and cannot call them: "
                "use numba.cuda.jit for this kernel, or link the code without callbacks",
                name=str(lib._entry_name),
            )


CARVEOUTS = {"default": -1, "maxl1": 0, "maxshared": 100}


def carveout(value: Any) -> int | None:
    """``shared_memory_carveout=`` as numba-cuda reads it: None, -1 to 100 (percent), or a name."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"shared_memory_carveout must be an int or a str, got {value!r}")
    if isinstance(value, str):
        if value.lower() not in CARVEOUTS:
            raise ValueError(
                f"shared_memory_carveout {value!r} is not one of 'MaxL1', 'MaxShared', 'default' (or -1 to 100)"
            )
        return CARVEOUTS[value.lower()]
    if not -1 <= value <= 100:
        raise ValueError(f"shared_memory_carveout {value} is out of range: give -1 (default) to 100 (percent)")
    return value

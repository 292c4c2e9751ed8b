"""The numba-cuda internals the low layers of lazykern borrow, and every patch lazykern applies to Numba.

Each function names the private object it reaches so that ``tests/test_numba_adapter.py`` can check
it against the installed numba-cuda and say which one moved. Nothing outside ``lazykern._numba``
imports a private numba-cuda module (an import-linter contract holds that); this module sits low
(it imports nothing from lazykern) so that device, memory and capture code can use it.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

# The module of Numba's device array classes: launch paths recognise its arrays by class, cheaply.
DEVICE_ARRAY_MODULE = "numba.cuda.cudadrv.devicearray"
SIMULATOR_MODULE = "numba.cuda.simulator"

log = logging.getLogger("lazykern")

# Numba's allocators and copies, which the capture guards wrap (see _capture_hooks).
ALLOCATORS = (
    "to_device",
    "device_array",
    "device_array_like",
    "pinned_array",
    "pinned_array_like",
    "mapped_array",
    "mapped_array_like",
    "managed_array",
)


def simulating() -> bool:
    """Whether Numba runs kernels on its CPU simulator (``numba.cuda.core.config.ENABLE_CUDASIM``)."""
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


def numba_config() -> Any:
    """``numba.cuda.core.config`` (NVRTC search paths, simulator switch)."""
    from numba.cuda.core import config

    return config


def context() -> Any:
    """Numba's context of the current device, created if there is none yet
    (``numba.cuda.cudadrv.devices.get_context``)."""
    from numba.cuda.cudadrv.devices import get_context

    return get_context()


def have_nvjitlink() -> bool:
    """Whether numba-cuda links with nvJitLink, its default for ``lto`` (``cudadrv.driver._have_nvjitlink``)."""
    from numba.cuda.cudadrv.driver import _have_nvjitlink

    return bool(_have_nvjitlink())


@functools.cache
def nvvm_version() -> str:
    """libNVVM's version through ``numba.cuda.cudadrv.nvvm.NVVM``; "?" where there is no libNVVM."""
    try:
        from numba.cuda.cudadrv import nvvm

        return ".".join(map(str, nvvm.NVVM().get_version()))
    except Exception:  # no libNVVM: nothing can compile anyway, keys still differ by numba-cuda version
        return "?"


def typeof(value: Any) -> Any:
    """Numba's type of a host value (``numba.cuda.typing.typeof.typeof``)."""
    from numba.cuda.typing.typeof import typeof as numba_typeof

    return numba_typeof(value)


def is_fp16_lto_warning(callback: Any) -> bool:
    """Whether ``callback`` is numba-cuda's float16 shim's setup callback
    (``numba.cuda._internal.cuda_fp16.lto_warning_callback``), which only warns."""
    from numba.cuda._internal import cuda_fp16

    return callback is cuda_fp16.lto_warning_callback


def struct_members(t: Any) -> tuple[Any, ...] | None:
    """The member types of ``t``'s struct data model in numba-cuda's data model manager
    (``cuda_target.target_context.data_model_manager``), None where its model is not a struct:
    how a kernel receives a user extension type."""
    if simulating():  # the simulator has no data models (and no kernel parameters)
        return None
    from numba.cuda.descriptor import cuda_target

    try:
        model = cuda_target.target_context.data_model_manager.lookup(t)
    except Exception:  # no model registered: Numba could not lower it either
        return None
    members = getattr(model, "_members", None)
    return tuple(members) if isinstance(members, tuple) else None


def data_size(t: Any) -> int | None:
    """Bytes one ``t`` takes in an array, from numba-cuda's data model (a user type's struct model
    has no NumPy dtype); None where ``t`` has no model."""
    if simulating():
        return None
    from numba.cuda.descriptor import cuda_target

    context = cuda_target.target_context
    try:
        return int(context.get_abi_sizeof(context.data_model_manager.lookup(t).get_data_type()))
    except Exception:  # no model registered: Numba could not lower it either
        return None


def invalid_config_warning() -> type[Warning]:
    """numba-cuda's warning for option combinations it advises against
    (``numba.cuda.core.errors.NumbaInvalidConfigWarning``)."""
    from numba.cuda.core.errors import NumbaInvalidConfigWarning

    cls: type[Warning] = NumbaInvalidConfigWarning
    return cls


def arg_hint(value: Any) -> tuple[Any, str] | None:
    """``(wrapped value, "host" | "host-in" | "host-out")`` for ``cuda.In`` / ``InOut`` / ``Out``
    (``numba.cuda.args``), None for anything else."""
    from numba.cuda import args

    if not isinstance(value, args.ArgHint):
        return None
    if isinstance(value, args.InOut):  # a subclass of Out: test it first
        return value.value, "host"
    if isinstance(value, args.Out):
        return value.value, "host-out"
    if isinstance(value, args.In):
        return value.value, "host-in"
    return value.value, "host"


def is_signature(value: Any) -> bool:
    """Whether ``cuda.jit`` would read ``value`` as a signature (``numba.cuda.core.sigutils.is_signature``)."""
    from numba.cuda.core import sigutils

    return bool(sigutils.is_signature(value))


def normalize_signature(sig: Any) -> tuple[tuple[Any, ...], Any]:
    """``(argument types, return type)`` (``numba.cuda.core.sigutils.normalize_signature``)."""
    from numba.cuda.core import sigutils

    args_and_return: tuple[tuple[Any, ...], Any] = sigutils.normalize_signature(sig)
    return args_and_return


def disassemble_cubin(code: bytes) -> str:
    """A cubin's SASS through numba-cuda's disassembler (``numba.cuda.codegen.disassemble_cubin``:
    nvdisasm with line info; numba-cuda's RuntimeError where nvdisasm is not found)."""
    import types as pytypes

    from numba.cuda.codegen import disassemble_cubin as disassemble

    return str(disassemble(pytypes.SimpleNamespace(code=code)))


def package_dir() -> str:
    """numba-cuda's ``numba/cuda`` directory (its NVRTC include dirs and helper ``.cu`` files live there)."""
    import numba.cuda.cudadrv.nvrtc

    nvrtc_py: str = numba.cuda.cudadrv.nvrtc.__file__
    return os.path.dirname(os.path.dirname(os.path.abspath(nvrtc_py)))


def forget_file_reads() -> None:
    """numba-cuda reads each linked file once per process (``cached_file_read``): a ``.cu`` edited
    since would compile as it was while the key (and the header manifest) see it as it is now."""
    from numba.cuda.utils import cached_file_read

    cached_file_read.cache_clear()


# -- device arrays built without Numba's constructor (memory.py: 3 us of set-up become 0.3 us) --
def device_array_template(
    shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, dtype: Any
) -> dict[str, Any]:
    """The instance attributes of an empty ``DeviceNDArray`` (``_dummy`` from ``dummyarray.Array``),
    with no memory yet: a template that :func:`device_array_maker` copies."""
    from numba.cuda.cudadrv import devicearray, dummyarray

    arr = devicearray.DeviceNDArray.__new__(devicearray.DeviceNDArray)
    arr.ndim = len(shape)
    arr._dummy = dummyarray.Array.from_desc(0, tuple(shape), tuple(strides), itemsize)
    arr.shape, arr.strides = arr._dummy.shape, arr._dummy.strides
    arr.dtype, arr.size = dtype, arr._dummy.size
    nbytes = itemsize
    for n in shape:
        nbytes *= max(int(n), 1)
    arr.alloc_size = nbytes if arr.size else 0  # as Numba: an empty array copies no bytes
    arr.stream = 0
    return dict(arr.__dict__)


@functools.cache
def device_array_classes() -> tuple[Any, Any]:
    """``(DeviceNDArray, a MemoryPointer subclass over borrowed memory)``: the pointer sets the
    attributes ``driver.MemoryPointer`` reads, and keeps ``owner`` (what frees the memory) alive."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numba.cuda.cudadrv.driver import MemoryPointer

    class BorrowedPointer(MemoryPointer):  # type: ignore[misc]  # numba-cuda has no types: MemoryPointer is Any
        """A Numba MemoryPointer to ``size`` bytes at ``address`` that someone else frees (``owner``)."""

        def __init__(self, context: Any, address: int, size: int, owner: Any) -> None:
            self.context = context
            self.device_pointer = self.handle = address
            self.size = self._cuda_memsize_ = size
            self.is_managed = False
            self.refct = 1
            self._owner = owner

    return DeviceNDArray, BorrowedPointer


@functools.cache
def _owning_pointer_class() -> Any:
    from numba.cuda.cudadrv.driver import MemoryPointer

    class OwningPointer(MemoryPointer):  # type: ignore[misc]  # numba-cuda has no types: MemoryPointer is Any
        """A Numba MemoryPointer that owns a buffer lazykern allocated: when it dies (after its
        array, that array's views and every pointer borrowing the buffer),
        ``lazykern_free(address, *lazykern_home)`` gives the buffer back. Built from a dict
        (:func:`device_array_maker`), never by ``__init__``."""

        def __del__(self) -> None:
            try:
                self.lazykern_free(self.device_pointer, *self.lazykern_home)
            except Exception as exc:  # interpreter shutdown or a dead context: nobody to raise to
                log.debug("freeing %#x failed: %s", self.device_pointer, exc)

    return OwningPointer


def device_array_maker(
    parts: Sequence[tuple[dict[str, Any], int, int]],
    context: Any,
    allocate: Callable[[], int],
    free: Callable[..., None],
    home: tuple[Any, ...],
) -> Callable[[], tuple[Any, int, int]]:
    """``make()``: a new buffer from ``allocate()`` and a ``DeviceNDArray`` over it per (template,
    offset, size) of ``parts`` (:func:`device_array_template`; one or two, the first at offset 0),
    as (the array or the pair, the buffer's address, the second's address or 0). Built without
    Numba's constructors, a dict update per object: the first array's pointer owns the buffer
    (``free(address, *home)`` when it dies), the second's borrows it and keeps it alive."""
    cls, borrowed = device_array_classes()
    owning = _owning_pointer_class()
    if not 1 <= len(parts) <= 2 or parts[0][1] != 0:
        raise ValueError(f"one or two arrays per buffer, the first at offset 0: got (offset, size) {parts}")
    fields = {"context": context, "is_managed": False, "refct": 1, "lazykern_free": free, "lazykern_home": home}
    first, _, first_size = parts[0]
    own = {**fields, "size": first_size, "_cuda_memsize_": first_size, "_owner": None}

    def make_one() -> tuple[Any, int, int]:
        address = allocate()
        p = owning.__new__(owning)
        d = p.__dict__
        d.update(own)
        d["device_pointer"] = d["handle"] = address
        arr = cls.__new__(cls)
        d = arr.__dict__
        d.update(first)
        d["gpu_data"] = p
        return arr, address, 0

    if len(parts) == 1:
        return make_one
    second, offset, size = parts[1]
    lent = {**fields, "size": size, "_cuda_memsize_": size}

    def make_two() -> tuple[Any, int, int]:
        arr, address, _ = make_one()
        q = borrowed.__new__(borrowed)
        d = q.__dict__
        d.update(lent)
        d["device_pointer"] = d["handle"] = address + offset
        d["_owner"] = arr.__dict__["gpu_data"]
        other = cls.__new__(cls)
        d = other.__dict__
        d.update(second)
        d["gpu_data"] = q
        return (arr, other), address, address + offset

    return make_two


# -- patches: the only place lazykern assigns to Numba's attributes ----------------------------
def capture_patch_targets() -> dict[str, list[tuple[Any, str]]]:
    """The Numba attributes the capture guards wrap, by role:
    ``allocators`` (``numba.cuda.to_device`` ...), ``synchronize``, ``launch`` (``CUDADispatcher.call``,
    absent under the simulator), ``sim_getitem`` (the simulator's ``FakeCUDAKernel.__getitem__``) and
    ``copies`` (``copy_to_host`` / ``copy_to_device`` of Numba's device array base class)."""
    from numba import cuda

    out: dict[str, list[tuple[Any, str]]] = {
        "allocators": [(cuda, name) for name in ALLOCATORS if hasattr(cuda, name)],
        "synchronize": [(cuda, "synchronize")],
        "launch": [],
        "sim_getitem": [],
    }
    if simulating():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        out["sim_getitem"].append((FakeCUDAKernel, "__getitem__"))
        array_cls: type = FakeCUDAArray
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase
        from numba.cuda.dispatcher import CUDADispatcher

        out["launch"].append((CUDADispatcher, "call"))
        array_cls = DeviceNDArrayBase
    out["copies"] = [(array_cls, name) for name in ("copy_to_host", "copy_to_device")]
    return out


def patch(owner: Any, name: str, wrap: Callable[[Any], Any]) -> tuple[Any, str, Any]:
    """Replace ``owner.name`` by ``wrap(original)``; returns what :func:`unpatch` needs."""
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, wrap(original))
    return owner, name, original


def unpatch(saved: tuple[Any, str, Any]) -> None:
    owner, name, original = saved
    setattr(owner, name, original)


# -- one owner per loaded library --------------------------------------------------------------
# A CUlibrary (what cuda.core's ObjectCode loads) is context-independent, but Numba gives every
# context's module its own finalizer that unloads the module's library (``_module_finalizer``:
# ``cuLibraryUnload(object_code.handle)``). numba-cuda caches one ObjectCode per code library and
# arch (``CUDACodeLibrary._cubin_cache``) and hands that same object to ``create_module_image`` on
# every device: a ``@cuda.jit`` kernel run on two GPUs makes two modules over ONE library, and the
# second context's queue unloads a library the first already unloaded (issue 45: SIGSEGV / "double
# free" in ``weakref._exitfunc`` -> ``module_unload`` once both contexts' deallocation queues flush).
_images_loaded: dict[int, weakref.ref[Any]] = {}  # id(ObjectCode) -> it, once some context loaded it
_images_lock = threading.Lock()
_one_owner_patched = False


def _first_load(image: Any) -> bool:
    """Record ``image`` as loaded; False when some context loaded this very object before."""
    key = id(image)
    with _images_lock:
        ref = _images_loaded.get(key)
        if ref is not None and ref() is image:
            return False

        def forget(dead: weakref.ref[Any], key: int = key) -> None:
            with _images_lock:
                if _images_loaded.get(key) is dead:
                    del _images_loaded[key]

        try:
            _images_loaded[key] = weakref.ref(image, forget)
        except TypeError:  # not weak-referenceable: not an ObjectCode, nothing Numba shares
            pass
        return True


def private_image(image: Any) -> Any:
    """``image`` itself on its first load; a fresh, unloaded copy of it (same code, type, name and
    symbols: ``ObjectCode.__reduce__``) when another context loaded that object already, so that
    each module owns its library alone. Anything that cannot be copied is passed through."""
    if _first_load(image):
        return image
    try:
        fresh = copy.copy(image)
    except Exception as exc:  # an image type without pickling support: Numba's own path, as before
        log.debug("lazykern: could not copy %r for a second context: %s", image, exc)
        return image
    _first_load(fresh)
    return fresh


def one_owner_per_library() -> None:
    """Patch ``Context.create_module_image`` (once per process) so that no two Numba modules, in
    any contexts, share one CUlibrary: each library then has one owner, its module's finalizer,
    which unloads it once. Costs one extra cubin load (~0.2 ms) per kernel and extra device."""
    global _one_owner_patched
    if _one_owner_patched or simulating():
        return
    with _images_lock:
        if _one_owner_patched:
            return
        from numba.cuda.cudadrv.driver import Context

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            def create_module_image(self: Any, image: Any, *args: Any, **kwargs: Any) -> Any:
                return original(self, private_image(image), *args, **kwargs)

            return create_module_image

        patch(Context, "create_module_image", wrap)
        _one_owner_patched = True


def numba_contexts() -> list[Any]:
    """The primary contexts Numba holds, one per device it used (``driver.devices``,
    ``Device.primary_context``)."""
    if simulating():
        return []
    from numba.cuda.cudadrv.driver import driver

    devices = driver.__dict__.get("devices") or {}
    return [ctx for dev in list(devices.values()) if (ctx := getattr(dev, "primary_context", None)) is not None]


def detach_shared_unloads() -> int:
    """At exit: where modules of several contexts still share one library (loaded before
    :func:`one_owner_per_library` was patched in), leave its unload to the first module only
    (``CudaPythonModule._finalizer.detach()`` on the others); returns how many were detached."""
    owners: set[int] = set()
    detached = 0
    for ctx in numba_contexts():
        for module in list(ctx.modules.values()):
            library = int(module.handle)
            if library not in owners:
                owners.add(library)
                continue
            finalizer = getattr(module, "_finalizer", None)
            if finalizer is not None and finalizer.detach() is not None:
                detached += 1
    return detached

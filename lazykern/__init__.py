"""lazykern: GPU kernels compiled lazily, cached per machine, launched fast.

``import lazykern`` imports only its settings and errors: the public names below
(and ``lazykern.tropical``) import their modules, with NumPy, Numba and
cuda.core, the first time they are used (start-up time: ``lazykern --help`` and
a process that only configures lazykern stay fast).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _aliases, config
from .errors import CacheError, CaptureError, CompileError, LaunchError, LazykernError, LazykernWarning

if TYPE_CHECKING:
    from . import graph, tropical
    from .compile.compiler import CompileResult, compile_source, current_arch, nvrtc_version
    from .families.family import KernelFamily
    from .jit.decorator import LazyKernel, lazy_kernel
    from .launch import arrays
    from .launch.kernel import Kernel
    from .store.cache import KernelCache, default_cache, make_key, set_default_cache

__version__ = "0.1.0"

# Public name -> the module that defines it: imported on first use (startup time).
_LAZY = {
    "KernelCache": "lazykern.store.cache",
    "default_cache": "lazykern.store.cache",
    "make_key": "lazykern.store.cache",
    "set_default_cache": "lazykern.store.cache",
    "CompileResult": "lazykern.compile.compiler",
    "compile_source": "lazykern.compile.compiler",
    "current_arch": "lazykern.compile.compiler",
    "nvrtc_version": "lazykern.compile.compiler",
    "LazyKernel": "lazykern.jit.decorator",
    "lazy_kernel": "lazykern.jit.decorator",
    "KernelFamily": "lazykern.families.family",
    "Kernel": "lazykern.launch.kernel",
}
_LAZY_MODULES = {"arrays": "lazykern.launch.arrays", "graph": "lazykern.graph", "tropical": "lazykern.tropical"}

__all__ = [
    "CacheError",
    "CaptureError",
    "CompileError",
    "CompileResult",
    "Kernel",
    "KernelCache",
    "KernelFamily",
    "LaunchError",
    "LazyKernel",
    "LazykernError",
    "LazykernWarning",
    "__version__",
    "arrays",
    "compile_source",
    "current_arch",
    "default_cache",
    "graph",
    "lazy_kernel",
    "make_key",
    "nvrtc_version",
    "set_default_cache",
    "tropical",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(_LAZY_MODULES[name])
    elif f"{__name__}.{name}" in _aliases.PUBLIC_PATHS:  # a documented module path (lazykern.multigpu ...)
        value = importlib.import_module(_aliases.PUBLIC_PATHS[f"{__name__}.{name}"])
    else:
        raise AttributeError(f"module 'lazykern' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    config.check_settings()  # the package's first use: a mistyped LAZYKERN_* variable is reported, at the user's line
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext lazykern``: registers the ``%lazykern`` magic (see :mod:`lazykern.ipython`)."""
    from .tools.ipython import load_ipython_extension as load  # import on first use: the library never imports its apps

    load(ip)


_aliases.install()
config.configure_logging()  # a bad LAZYKERN_LOG is reported at first use, with the other settings

"""lazykern: GPU kernels compiled lazily, cached per machine, launched fast."""

from __future__ import annotations

from typing import Any

from . import config, graph
from .cache import KernelCache, LazykernWarning, default_cache, make_key, set_default_cache
from .compiler import CompileResult, compile_source, current_arch, nvrtc_version
from .decorator import LazyKernel, lazy_kernel
from .errors import CacheError, CaptureError, CompileError, LaunchError, LazykernError
from .family import KernelFamily
from .kernel import Kernel

__version__ = "0.1.0"

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


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext lazykern``: registers the ``%lazykern`` magic (see :mod:`lazykern.ipython`)."""
    from .ipython import load_ipython_extension as load  # import on first use: the library never imports its apps

    load(ip)


def __getattr__(name: str):
    # The tropical family registers 748 fragment texts: imported on first use only.
    if name == "tropical":
        import importlib

        return importlib.import_module(".tropical", __name__)
    raise AttributeError(f"module 'lazykern' has no attribute {name!r}")


config.configure_logging()

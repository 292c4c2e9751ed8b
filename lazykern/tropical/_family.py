"""The tropical ``KernelFamily``: preamble.cu plus one generated fragment per kernel.

Creating it registers a generator, no fragment text and compiles nothing; a
kernel's fragment is generated from its name, and compiled (or loaded from the
cache), the first time a call needs it.
"""

from __future__ import annotations

from importlib import resources

from ..families.family import KernelFamily
from ..store.cache import KernelCache
from . import fragments

OPTIONS = ("-std=c++17",)  # no fast-math: it would flush denormals and drop the NaN/inf rules


def preamble() -> str:
    return resources.files(__package__).joinpath("preamble.cu").read_text(encoding="utf-8")


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    """A fresh tropical family (tests use their own cache; the library uses the default one)."""
    fam = KernelFamily("tropical", preamble(), options=OPTIONS, cache=cache, core=fragments.core_names())
    fam.add_generator(fragments.fragment, fragments.names)
    # No twins: the kernels take raw pointers, and the public API never reaches them under the simulator.
    fam.simulator_note = (
        "Under the simulator, tropical.matmul / bmm / matmul_backward compute NumPy and simulator "
        "arrays with the NumPy reference (lazykern.tropical.reference): call those instead"
    )
    return fam


family = make_family()

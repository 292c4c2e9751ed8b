"""The tropical ``KernelFamily``: preamble.cu plus one generated fragment per kernel.

Creating it registers every fragment's text and compiles nothing; a kernel is
compiled (or loaded from the cache) the first time a call needs it.
"""

from __future__ import annotations

from importlib import resources

from ..cache import KernelCache
from ..family import KernelFamily
from .fragments import all_fragments, core_names

OPTIONS = ("-std=c++17",)  # no fast-math: it would flush denormals and drop the NaN/inf rules


def preamble() -> str:
    return resources.files(__package__).joinpath("preamble.cu").read_text(encoding="utf-8")


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    """A fresh tropical family (tests use their own cache; the library uses the default one)."""
    fam = KernelFamily("tropical", preamble(), options=OPTIONS, cache=cache, core=core_names())
    for name, (code, signature) in all_fragments().items():
        fam.add(name, code, signature=signature)
    # No twins: the kernels take raw pointers, and the public API never reaches them under the simulator.
    fam.simulator_note = (
        "Under the simulator, tropical.matmul / bmm / matmul_backward compute NumPy and simulator "
        "arrays with the NumPy reference (lazykern.tropical.reference): call those instead"
    )
    return fam


family = make_family()

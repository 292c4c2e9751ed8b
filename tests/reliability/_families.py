"""The families the reliability tests warm: a cheap synthetic one, or the real tropical one.

Worker processes import this file by path, so it must not rely on the tests
package; it only imports lazykern.
"""

from __future__ import annotations

import importlib

from lazykern import KernelCache, KernelFamily

SYNTHETIC_SIZE = 16
SYNTHETIC_PREAMBLE = "#define BUMP(i) ((i) + 1)\n"


def synthetic_fragments(n: int = SYNTHETIC_SIZE) -> dict[str, str]:
    """n tiny kernels; ``add_<i>`` adds i+1 to every element (distinct code, distinct cubin)."""
    return {
        f"add_{i}": f'extern "C" __global__ void add_{i}(int *a, int n) {{'
        f" int j = blockIdx.x * blockDim.x + threadIdx.x; if (j < n) a[j] += BUMP({i}); }}"
        for i in range(n)
    }


def synthetic_family(cache: KernelCache, n: int = SYNTHETIC_SIZE) -> KernelFamily:
    fam = KernelFamily("reliability", SYNTHETIC_PREAMBLE, cache=cache)
    for name, code in synthetic_fragments(n).items():
        fam.add(name, code, signature=["ptr", "int32"])
    return fam


def tropical_family(cache: KernelCache) -> KernelFamily:
    """The core kernels of ``lazykern.tropical.family``, re-bound to ``cache``.

    Raises ImportError while the tropical module does not exist yet.
    """
    module = importlib.import_module("lazykern.tropical")
    source = module.family
    if not isinstance(source, KernelFamily):
        source = source()
    fam = KernelFamily(source.name, source.source.preamble, options=source.source.options, cache=cache)
    for name in source.core_names():  # the core set (like the 31 kernels tropical-gemm compiles), not every variant
        frag = source.source.fragment(name)
        fam.add(frag.name, frag.code, symbol=frag.symbol, signature=frag.signature, options=frag.options)
    return fam


def make_family(kind: str, cache: KernelCache) -> KernelFamily:
    if kind == "synthetic":
        return synthetic_family(cache)
    if kind == "tropical":
        return tropical_family(cache)
    raise ValueError(f"unknown family kind {kind!r}")

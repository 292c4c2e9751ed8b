"""One tropical kernel cache per test run, so each kernel compiles once whichever tests ask for it.

``tropical_cache.family(arch)`` compiles the core kernels and :data:`SAMPLE_VARIANTS` for
``arch`` the first time any test asks (in parallel threads: NVRTC releases the GIL), and
returns a fresh family over that cache; ``seed`` copies warmed entries into a new cache
for tests that need their own directory. Under pytest-xdist every worker opens the same
store (its compile lock makes each kernel compile once in all) and walks the names in
its own order, so two workers warming one arch compile different kernels side by side.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from lazykern import KernelCache, KernelFamily

SAMPLE_VARIANTS = [
    "maxplus_f32_nt",
    "minplus_f64_argmax_tn",
    "bmm_maxmul_i32_tt",
    "maxplus_i64_argmax_nt_s",
    "bmm_minplus_f32_argmax_t",
    "maxmul_f64_tt_t",
    "bmm_maxplus_i32_argmax_tn_s",
    "minplus_i32_t",
    "maxplus_f32_r",
    "minplus_i64_argmax_r",
    "maxmul_f64_argmax_r",
    "maxplus_f32_r4",
    "minplus_i32_argmax_r4",
    "maxplus_f32_splitk",
    "minplus_f64_argmax_tn_splitk",
    "maxmul_i32_argmax_tt_splitk",
    "reduce_maxplus_f32",
    "reduce_minplus_i64_argmax",
]


class WarmTropical:
    def __init__(self, directory: os.PathLike, order: int = 0) -> None:
        self.cache = KernelCache(directory)
        self._order = order
        self._warmed: set[str] = set()
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        from lazykern.tropical import core_names

        return core_names() + SAMPLE_VARIANTS

    def family(self, arch: str) -> KernelFamily:
        """A new tropical family over the run's cache, where every one of :meth:`names` for ``arch`` is stored."""
        from lazykern.tropical import make_family

        with self._lock:
            if arch not in self._warmed:
                fam = make_family(self.cache)
                names = self.names()
                names = names[::-1] if self._order % 2 else names  # the other worker starts at the other end
                with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
                    list(pool.map(lambda name: _observed_get(fam, name, arch), names))
                self._warmed.add(arch)
        return make_family(self.cache)

    def seed(self, directory: os.PathLike, names: list[str], arch: str) -> None:
        """Store the warmed entries of ``names`` for ``arch`` in the cache at ``directory`` (no compile)."""
        fam = self.family(arch)
        target = KernelCache(directory)
        try:
            for name in names:
                key = fam.key(name, arch)
                entry = self.cache.lookup(key)
                assert entry is not None, f"{name} for {arch} is not in the run's tropical cache"
                target.store(key, entry.code, entry.meta)
        finally:
            target.close()


def _observed_get(fam: KernelFamily, name: str, arch: str) -> object:
    """Ahead of time, as ``lazykern warm`` does: each kernel compiled once, observed (no served copy)."""
    from lazykern.compile import compiler

    with compiler.observed_only():
        return fam.get(name, arch)


@pytest.fixture(scope="session")
def tropical_cache(tmp_path_factory, worker_id: str) -> WarmTropical:
    if worker_id == "master":  # no xdist: this run's own directory
        warm = WarmTropical(tmp_path_factory.mktemp("tropical-cache"))
    else:  # gw0, gw1, ...: one directory beside the workers' own, shared by all of them
        shared = tmp_path_factory.getbasetemp().parent / "tropical-cache"
        warm = WarmTropical(shared, order=int(worker_id.removeprefix("gw")))
    yield warm
    warm.cache.close()

"""Hit, miss and compile counts: this process's totals, and the store's own, written off the warm path."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from .. import _fork
from ._store import FOREIGN, STORE_ERRORS, DiskBackend, MemoryBackend

if TYPE_CHECKING:
    from ._store_ro import ReadOnlyBackend

STAT = "lazykern:stat:"
STAT_ROOT = "lazykern:"
COUNTERS = ("lookups", "hits", "misses", "compiles", "compile_ms", "saved_ms", "corrupt")
DEFERRED = ("hits", "saved_ms")  # a hit writes nothing: its counts go with the next write, or at exit
# Every KernelCache of this process together, plus the simulator's instantiations:
# what lazykern.testing.assert_no_compile() watches.
_totals = dict.fromkeys(COUNTERS, 0)
_totals_lock = _fork.lock()


def process_totals() -> dict[str, int]:
    """Lookups, hits, misses and compiles of every cache in this process so far."""
    with _totals_lock:
        return dict(_totals)


def record(name: str, delta: int = 1) -> None:
    """Add to this process's totals (the simulator's route, which stores nothing, reports here)."""
    with _totals_lock:
        _totals[name] += delta


def add_count(backend: DiskBackend | MemoryBackend | ReadOnlyBackend, name: str, delta: int) -> str | None:
    """Add to a persistent counter; ``name`` when its row held garbage and was reset, else None."""
    try:
        return None if backend.incr(STAT + name, delta) else name
    except (*STORE_ERRORS, *FOREIGN):
        return None


def write_counts(
    backend: DiskBackend | MemoryBackend | ReadOnlyBackend, pending: dict[str, int], lock: threading.Lock, pid: int
) -> list[str]:
    """Write and clear ``pending`` counts (an UPDATE in place where the row exists); the names reset."""
    if os.getpid() != pid:
        return []  # a forked child: the counts are its parent's
    add = getattr(backend, "add", None)
    if add is None:
        return []  # a read-only store: nothing is written, counters included
    with lock:
        items = list(pending.items())
        pending.clear()
    reset = []
    for name, delta in items:
        if add(STAT + name, delta):  # one UPDATE in place: diskcache is not opened for it
            continue
        bad = add_count(backend, name, delta)
        if bad is not None:
            reset.append(bad)
    return reset

"""What lazykern releases when the process exits, in which order, before Numba's own finalizers.

Numba's exit work runs from one ``atexit`` entry, ``weakref.finalize``'s exit function, which it
registers when ``numba.cuda`` is imported; ``atexit`` runs the latest registration first, so
:func:`install`, called when lazykern first makes a GPU resource (numba.cuda is imported by then),
puts :func:`teardown` ahead of it. There lazykern releases what it owns, one phase after the other,
each device's work with that device current (docs/ARCHITECTURE.md, "At exit"):

1. ``graphs``: lazykern's graph execs and graphs (they name kernels of lazykern's modules and
   addresses in its pools), after synchronizing their device;
2. ``streams``: the staging streams and pinned buffers lazykern keeps (Numba objects: dropping
   them queues their destruction on their context, flushed in the next phase);
3. ``modules``: every module lazykern loaded, unloaded through Numba's own path per context
   (``Context.unload_module``, then that context's deallocation queue flushed with it current),
   so Numba's exit finalizer finds nothing of lazykern's left to unload;
4. ``memory``: lazykern's memory pools, trimmed and destroyed per device after a synchronize.

Each releaser is guarded: a failure is logged at debug level and the next one runs; nothing
here raises at exit. In a forked child that never installed it, the parent's entry does nothing
(the handles are the parent's). :func:`teardown` runs once; later calls return at once.
``LAZYKERN_EXIT_TEARDOWN=0`` leaves everything to Numba and the driver (to compare exits).
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Callable

from . import _fork, config

log = logging.getLogger("lazykern")

PHASES = ("graphs", "streams", "modules", "memory")

_releasers: dict[str, list[Callable[[], None]]] = {phase: [] for phase in PHASES}
_installed_by: int | None = None  # pid that registered the atexit entry
_done = False
_lock = _fork.lock()  # the first GPU resources can be made by several device threads at once


def on_exit(phase: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register ``fn()`` to release what its module owns during ``phase`` of :func:`teardown`."""
    if phase not in _releasers:
        raise ValueError(f"exit phase must be one of {PHASES}, got {phase!r}")

    def register(fn: Callable[[], None]) -> Callable[[], None]:
        _releasers[phase].append(fn)
        return fn

    return register


def install() -> None:
    """Register :func:`teardown` with ``atexit`` once per process; call it after ``numba.cuda`` is
    imported (when the first GPU resource is made), so that it runs before Numba's exit finalizers."""
    global _installed_by, _done
    pid = os.getpid()
    if _installed_by == pid:
        return
    with _lock:
        if _installed_by == pid or not config.exit_teardown_enabled():
            return
        _installed_by, _done = pid, False
        atexit.register(teardown)


def installed() -> bool:
    return _installed_by == os.getpid()


def teardown() -> list[tuple[str, str, str]]:
    """Run every releaser, phase by phase; returns ``(phase, releaser, error)`` for those that failed."""
    global _done
    failures: list[tuple[str, str, str]] = []
    if _done or _installed_by != os.getpid():
        return failures
    _done = True
    for phase in PHASES:
        for fn in list(_releasers[phase]):
            try:
                fn()
            except BaseException as exc:  # at exit: nobody to raise to, and the next phase still matters
                name = getattr(fn, "__qualname__", repr(fn))
                failures.append((phase, name, f"{type(exc).__name__}: {exc}"))
                log.debug("lazykern exit: %s (%s) failed: %s", name, phase, exc)
    return failures

"""Stores that wait for what a compile read: the kernel is served at once, its entry written later.

A compile's served binary is ready before the observed compile (the same bytes, traced, in a
compile server, ``lazykern.compile._tracer``) whose binary and manifest are what the store keeps. So the store of a
fresh compile runs in a thread of its own (:func:`submit`) while the caller already has the kernel.
Until it is done, this process's lookups of that key wait for it (:func:`wait_for`), so a key is
compiled once here; other processes wait on the key's compile lock, which the job holds until the
entry is written. At interpreter exit pending stores get :data:`EXIT_WAIT_S` seconds (a Ctrl-C ends
the wait), then are dropped with one log line (the next process compiles again). A forked child forgets its parent's
jobs: their threads do not exist there.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable

from .. import _fork

log = logging.getLogger("lazykern")

EXIT_WAIT_S = 30.0  # an observed compile takes about as long as the compile that already finished

_jobs: dict[str, threading.Event] = {}  # key -> set once its entry is written (or dropped)
# Keys given up at exit: their jobs, which may still get their observed compile's answer while the
# interpreter ends (its compile server torn down: a memory-only marker), write nothing (:func:`dropped`).
_dropped: set[str] = set()
_lock = _fork.lock()
# One write at a time, as when stores were synchronous: a size-limited store culls one entry per write,
# and writes that overlap let it run past its limit. Only the write: a job waits for its observed
# compile outside it, so one that is slow (or stuck, until its bound) holds up no other key.
_writing = _fork.lock()
_exit_registered = False


def submit(key: str, job: Callable[[], None]) -> None:
    """Run ``job`` (which writes the entry of ``key``, under :func:`writing`) in a thread; lookups
    of ``key`` wait for it."""
    global _exit_registered
    done = threading.Event()
    with _lock:
        _jobs[key] = done
        if not _exit_registered:
            _exit_registered = True
            # Registered after the store and the trace servers: atexit runs it before their teardown.
            atexit.register(_at_exit)

    def run() -> None:
        try:
            job()
        except Exception:  # a store that fails is a recompile in the next process, never a crash here
            log.warning(
                "lazykern could not store entry %s...; the next process compiles it again", key[:16], exc_info=True
            )
        finally:
            with _lock:
                if _jobs.get(key) is done:
                    del _jobs[key]
            done.set()

    threading.Thread(target=run, name=f"lazykern-store-{key[:12]}", daemon=True).start()


def writing() -> threading.Lock:
    """Held around each write of a deferred store (see ``_writing``)."""
    return _writing


def wait_for(key: str, timeout: float | None = None) -> bool:
    """Wait until the pending store of ``key`` (if any) is done; False if it still runs after ``timeout``."""
    done = _jobs.get(key)  # the warm path: one dict lookup, no lock
    return True if done is None else done.wait(timeout)


def wait_all(timeout: float | None = None) -> list[str]:
    """Wait for every pending store (at most ``timeout`` seconds in all); the keys still pending."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lock:
        pending = list(_jobs.items())
    left = []
    for key, done in pending:
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        if not done.wait(remaining):
            left.append(key)
    return left


def abandon(key: str) -> None:
    """Exit without waiting for the store of ``key`` (a warm stopped by a signal stops now; the entry
    is written only if its job finishes first, else the next process compiles it again)."""
    with _lock:
        _jobs.pop(key, None)


def dropped(key: str) -> bool:
    """Whether the store of ``key`` was given up at exit: its job must not write (asked under
    :func:`writing`, which the giving up holds)."""
    with _lock:
        return key in _dropped


def pending() -> list[str]:
    """Keys whose store has not finished yet."""
    with _lock:
        return list(_jobs)


def _at_exit() -> None:
    try:
        left = wait_all(EXIT_WAIT_S)
    except KeyboardInterrupt:  # Ctrl-C while waiting: the user wants out now
        left = pending()
    if left:
        with _writing, _lock:  # no write runs now: those still pending write nothing after this
            left = [k for k in left if k in _jobs]
            _dropped.update(left)
    if left:
        log.warning(
            "lazykern dropped %d kernel store(s) still waiting for their header trace after %.0f s at exit "
            "(the next process compiles them again): %s",
            len(left),
            EXIT_WAIT_S,
            ", ".join(k[:16] for k in left),
        )


@_fork.on_child
def _forget_parents_jobs() -> None:
    _jobs.clear()  # the parent's threads: none of them runs here
    _dropped.clear()

"""The per-key compile lock shared by processes: a file lock that never takes a process down.

A lock that cannot be taken (the path is a directory, the file is unreadable,
another process holds it for longer than the timeout, e.g. a stuck one) costs
a duplicate compile, never an exception: the caller compiles without the lock
after a bounded wait and is told why once.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from types import TracebackType

import filelock

LOCK_DIR = "locks"


def shared_mode(directory: str) -> int:
    """The permission bits new files get: those of the cache directory (group-shared dirs stay shared)."""
    try:
        return stat.S_IMODE(os.stat(directory).st_mode)
    except OSError:
        return 0o700


class ProcessLock:
    """``with ProcessLock(directory, name, timeout, on_fail):`` holds the lock, or goes on without it."""

    def __init__(self, directory: str, name: str, timeout: float, on_fail: Callable[[str], None]) -> None:
        self.directory = directory
        self.name = name
        self.timeout = timeout
        self.on_fail = on_fail
        self._lock: filelock.BaseFileLock | None = None

    def __enter__(self) -> ProcessLock:
        mode = shared_mode(self.directory)
        lock_dir = os.path.join(self.directory, LOCK_DIR)
        path = os.path.join(lock_dir, self.name + ".lock")
        try:
            if not os.path.isdir(lock_dir):
                os.makedirs(lock_dir, exist_ok=True)
                os.chmod(lock_dir, mode)
            # Not thread-local: a deferred store releases it from its own thread (store/_later.py).
            lock = filelock.FileLock(
                path, timeout=self.timeout, mode=mode & 0o666, is_singleton=False, thread_local=False
            )
            lock.acquire()
        except filelock.Timeout:
            self.on_fail(
                f"lazykern waited {self.timeout:g} s for another process's compile lock {path!r}; "
                "compiling without it (a stuck process may hold it; LAZYKERN_LOCK_TIMEOUT sets the wait)."
            )
            return self
        except (OSError, ValueError) as exc:
            self.on_fail(f"lazykern could not take its compile lock {path!r} ({exc}); compiling without it.")
            return self
        self._lock = lock
        return self

    def __exit__(self, typ: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._lock is not None:
            try:
                self._lock.release()
            except OSError:
                pass
            self._lock = None


def share(path: str, mode: int) -> None:
    """Give a file or directory this process created the cache directory's permission bits (best effort)."""
    bits = mode if os.path.isdir(path) else mode & 0o666
    try:
        if stat.S_IMODE(os.stat(path).st_mode) != bits:
            os.chmod(path, bits)
    except OSError:
        pass  # another user's file: theirs to share


class NullLock:
    def __enter__(self) -> NullLock:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

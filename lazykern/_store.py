"""Where cache values live: a diskcache directory, or memory when disk is unusable.

Both backends hold opaque ``bytes`` under ``str`` keys. The disk backend uses a
``diskcache.Disk`` that refuses to pickle or unpickle anything: a writable,
shared cache directory must never be a way to run code (CVE-2025-69872).
"""

from __future__ import annotations

import collections
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import diskcache
from diskcache.core import MODE_PICKLE, MODE_TEXT

from .errors import CacheError

STORE_ERRORS = (OSError, sqlite3.Error, CacheError, diskcache.Timeout)


class NoPickleDisk(diskcache.Disk):
    """A diskcache ``Disk`` for bytes, str keys and int counters only."""

    def put(self, key: Any):
        if not isinstance(key, str):
            raise CacheError(f"cache keys must be str, got {type(key).__name__}")
        return super().put(key)

    def get(self, key: Any, raw: bool):
        if not raw:
            raise CacheError("refusing to unpickle a cache key (poisoned entry)")
        return super().get(key, raw)

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN):
        if read or not isinstance(value, (bytes, int)) or isinstance(value, bool):
            raise CacheError(f"cache values must be bytes, got {type(value).__name__}")
        return super().store(value, read, key=key)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool):
        if mode in (MODE_PICKLE, MODE_TEXT):
            raise CacheError("refusing to unpickle a cache value (poisoned entry)")
        return super().fetch(mode, filename, value, False)


class DiskBackend:
    kind = "disk"

    def __init__(self, directory: str, size_limit: int) -> None:
        self.directory = directory
        self.cache = diskcache.Cache(
            directory,
            disk=NoPickleDisk,
            size_limit=size_limit,
            eviction_policy="least-recently-used",
            cull_limit=1,  # evict one LRU entry per write, not ten at once
            statistics=0,
            timeout=30,
        )
        self.size_limit = size_limit

    def get(self, key: str) -> Any:
        return self.cache.get(key, default=None, retry=True)

    def set(self, key: str, value: bytes, tag: str | None = None) -> None:
        self.cache.set(key, value, tag=tag, retry=True)

    def delete(self, key: str) -> bool:
        return bool(self.cache.delete(key, retry=True))

    def incr(self, key: str, delta: int) -> None:
        self.cache.incr(key, delta, default=0, retry=True)

    def keys(self) -> Iterator[str]:
        return iter(list(self.cache.iterkeys()))

    def rows(self) -> Iterator[tuple[str, int, float, float]]:
        """(key, size, store_time, access_time) of every row, read from SQLite."""
        sql = "SELECT key, size, store_time, access_time FROM Cache WHERE raw = 1"
        yield from self.cache._sql(sql).fetchall()

    def volume(self) -> int:
        return int(self.cache.volume())

    def __len__(self) -> int:
        return len(self.cache)

    def clear(self) -> None:
        self.cache.clear(retry=True)

    def cull(self, size_limit: int) -> int:
        old = self.cache.size_limit
        self.cache.reset("size_limit", size_limit)
        try:
            return self.cache.cull(retry=True)
        finally:
            self.cache.reset("size_limit", old)

    def check(self, fix: bool) -> list[str]:
        return [str(w.message) for w in self.cache.check(fix=fix, retry=True)]

    def close(self) -> None:
        self.cache.close()


class MemoryBackend:
    """An LRU dict, used when the disk tier is off or unusable."""

    kind = "memory"
    directory = None

    def __init__(self, size_limit: int) -> None:
        self.size_limit = size_limit
        self.data: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self.times: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self.lock:
            value = self.data.get(key)
            if value is not None:
                self.data.move_to_end(key)
            return value

    def set(self, key: str, value: bytes, tag: str | None = None) -> None:
        import time

        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            self.times[key] = (time.time(), time.time())
            self._cull(self.size_limit)

    def _cull(self, limit: int) -> int:
        n = 0
        while self.data and self.volume() > limit:
            key, _ = self.data.popitem(last=False)
            self.times.pop(key, None)
            n += 1
        return n

    def cull(self, size_limit: int) -> int:
        with self.lock:
            return self._cull(size_limit)

    def delete(self, key: str) -> bool:
        with self.lock:
            self.times.pop(key, None)
            return self.data.pop(key, None) is not None

    def incr(self, key: str, delta: int) -> None:
        with self.lock:
            self.data[key] = int(self.data.get(key, 0)) + delta

    def keys(self) -> Iterator[str]:
        return iter(list(self.data))

    def rows(self) -> Iterator[tuple[str, int, float, float]]:
        for key, value in list(self.data.items()):
            if isinstance(value, bytes):
                stored, used = self.times.get(key, (0.0, 0.0))
                yield key, len(value), stored, used

    def volume(self) -> int:
        return sum(len(v) for v in self.data.values() if isinstance(v, bytes))

    def __len__(self) -> int:
        return len(self.data)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()
            self.times.clear()

    def check(self, fix: bool) -> list[str]:
        return []

    def close(self) -> None:
        pass

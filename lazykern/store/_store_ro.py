"""A store lazykern may read but not write: a team's pre-built cache mounted read-only, say.

diskcache cannot open such a store: it writes its settings and creates its
tables on open, and SQLite needs to create a ``-shm`` file next to a WAL
database even to read it. :class:`ReadOnlyBackend` reads the same files
through SQLite's read-only modes instead and serves their entries, with the
same checks as the disk backend (no pickles, blob names inside the directory,
regular files only, bounded reads), and writes nothing: no access times, no
counters, no locks. Kernels compiled meanwhile live in memory for the process.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

from diskcache.core import DBNAME

from ..errors import CacheError
from ._store import MemoryBackend, NoPickleDisk, blob_files, file_age, valid_blob_name

_ROWS = (
    "SELECT key, COALESCE(size, 0), COALESCE(store_time, 0), COALESCE(access_time, 0) FROM Cache"
    " WHERE raw = 1 AND typeof(key) = 'text'"
)


def holds_store(directory: str) -> bool | None:
    """Whether ``directory`` holds a lazykern/diskcache store; None when it cannot be looked into."""
    try:
        os.stat(os.path.join(directory, DBNAME))
        return True
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return None


def _connect(path: str) -> sqlite3.Connection:
    """A read-only connection, or the reason there is none.

    ``mode=ro`` sees everything, a WAL not yet checkpointed included, but needs the
    ``-shm`` file to exist or be creatable. Where it is neither (a read-only copy of a
    store that was closed cleanly, so its WAL is empty), ``immutable=1`` reads the file
    without any shared memory or locking.
    """
    if not os.path.isfile(path):
        raise CacheError(f"{path} does not exist or is not a file")
    uri = "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    errors: list[sqlite3.Error] = []
    for flags in ("?mode=ro", "?mode=ro&immutable=1"):
        con = None
        try:
            con = sqlite3.connect(uri + flags, uri=True, timeout=5, check_same_thread=False)
            con.execute("SELECT COUNT(*) FROM Cache WHERE rowid < 0").fetchone()  # the table is there and readable
            return con
        except sqlite3.Error as exc:
            if con is not None:
                con.close()
            errors.append(exc)
    raise errors[-1]


class ReadOnlyBackend:
    """Serve a store's entries without writing to it; keep new entries in memory."""

    kind = "read-only"
    quarantined: tuple[str, ...] = ()

    def __init__(self, directory: str, size_limit: int) -> None:
        self.directory = directory
        self.size_limit = size_limit
        self._connection = _connect(os.path.join(directory, DBNAME))
        self._blobs = NoPickleDisk(directory)  # its fetch() holds every check a blob read needs
        self._lock = threading.Lock()
        self.memory = MemoryBackend(size_limit)

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            return self._connection.execute(sql, args).fetchall()

    def _refuse(self, what: str) -> CacheError:
        return CacheError(f"the lazykern cache at {self.directory!r} is read-only: cannot {what}")

    # -- what KernelCache reads -------------------------------------------------
    def get(self, key: str, touch: bool = True) -> Any:
        """The value under ``key``; a read-only store never marks anything used (``touch`` is moot)."""
        value = self.memory.get(key)
        if value is not None:
            return value
        rows = self._query("SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1", (key,))
        if not rows:
            return None
        mode, filename, stored = rows[0]
        return self._blobs.fetch(mode, filename, stored, False)

    def rows(self) -> list[tuple[str, int, float, float]]:
        return [*self._query(_ROWS), *self.memory.rows()]

    def volume(self) -> int:
        ((size,),) = self._query("SELECT COALESCE(SUM(size), 0) FROM Cache WHERE typeof(size) = 'integer'")
        return int(size) + os.path.getsize(os.path.join(self.directory, DBNAME)) + self.memory.volume()

    def __len__(self) -> int:
        ((count,),) = self._query("SELECT COUNT(*) FROM Cache")
        return int(count) + len(self.memory)

    # -- what KernelCache writes: memory only ----------------------------------
    def set(self, key: str, value: bytes, tag: str | None = None) -> None:
        self.memory.set(key, value, tag)

    def incr(self, key: str, delta: int) -> bool:
        return True  # the store's counters stay as its writers left them

    def delete(self, key: str) -> bool:
        """Forget an entry kept in memory; one on disk cannot go (CacheError; a bad one is simply not served)."""
        if self.memory.delete(key):
            return True
        if self._query("SELECT 1 FROM Cache WHERE key = ? AND raw = 1", (key,)):
            raise self._refuse(f"delete entry {key[:16]}...")
        return False

    def clear(self) -> None:
        raise self._refuse("clear it")

    def cull(self, size_limit: int) -> int:
        raise self._refuse("evict from it")

    # -- inspection ------------------------------------------------------------
    def check(self, repair: bool, min_age: float) -> dict[str, Any]:
        """What :meth:`lazykern.store._store.DiskBackend.check` reports, found by reading only."""
        if repair:
            raise self._refuse("repair it")
        problems = [r[0] for r in self._query("PRAGMA integrity_check") if r[0] != "ok"]
        referenced, missing = set(), 0
        for (filename,) in self._query("SELECT filename FROM Cache WHERE filename IS NOT NULL"):
            full = os.path.join(self.directory, filename) if valid_blob_name(filename) else None
            if full is None or not os.path.isfile(full):
                missing += 1
            else:
                referenced.add(os.path.normpath(full))
        now = time.time()
        orphans = [
            p
            for p in blob_files(self.directory)
            if os.path.normpath(p) not in referenced and file_age(p, now) >= min_age
        ]
        return {
            "integrity": "; ".join(problems[:5]) or "ok",
            "quarantined": None,
            "missing_files": missing,
            "orphan_files": len(orphans),
        }

    def foreign_rows(self, repair: bool) -> int:
        if repair:
            raise self._refuse("repair it")
        return len(self._query("SELECT rowid FROM Cache WHERE raw = 0"))

    def close(self) -> None:
        with self._lock:
            self._connection.close()

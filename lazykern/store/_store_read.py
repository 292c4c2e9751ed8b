"""The read-only fast path of the disk store: one SELECT per lookup, no diskcache open.

Opening a ``diskcache.Cache`` costs about 90 SQLite statements (it reads and rewrites
every setting, re-applies each as a PRAGMA, runs ``CREATE TABLE/INDEX IF NOT EXISTS``),
and its ``get`` under an LRU policy is a write transaction that moves ``access_time``.
A warm process that only loads kernels needs none of that: this reader opens a plain
SQLite connection to the existing database and answers a lookup with the one query
diskcache itself would run, decoding the value through the same no-pickle ``Disk``.

``access_time`` (what LRU eviction goes by) is moved only when it is older than
:data:`TOUCH_AFTER` seconds, so a store used all day pays that write once per entry and
day, not once per lookup. Everything else (writes, counters, repairs) goes through the
full diskcache open, which the backend makes on first need.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

TOUCH_AFTER = 6 * 3600.0  # LRU granularity: a lookup rewrites access_time at most this often
_TOUCH = "UPDATE Cache SET access_time = ? WHERE rowid = ?"
_COUNTER_MAX = 1 << 62  # what the store calls a sane counter (cache.py resets anything else)
# diskcache's MODE_RAW (1): an integer stored in the row itself.
_ADD = (
    "UPDATE Cache SET value = value + ?, store_time = ?, access_time = ? WHERE key = ? AND raw = 1"
    " AND mode = 1 AND filename IS NULL AND expire_time IS NULL AND typeof(value) = 'integer'"
    " AND value >= 0 AND value < ?"
)
_SELECT = (
    "SELECT rowid, mode, filename, value, access_time FROM Cache"
    " WHERE key = ? AND raw = 1 AND (expire_time IS NULL OR expire_time > ?)"
)


class Reader:
    """Lookups on a plain connection per thread (and per process: a fork opens its own).

    ``disk`` decodes a row (``NoPickleDisk.fetch``); ``timeout`` is SQLite's busy timeout,
    which a WAL reader only meets while another process recovers or checkpoints the file.
    """

    def __init__(self, db_path: str, disk: Any, timeout: float) -> None:
        self.db_path = db_path
        self.disk = disk
        self.timeout = timeout
        self._local = threading.local()
        self._generation = 0  # moved by close(): every thread's connection is then opened anew

    def _connection(self) -> sqlite3.Connection:
        local = self._local
        if getattr(local, "pid", None) != os.getpid() or local.generation != self._generation:
            # A connection inherited through fork must not be used (SQLite's rule), and one opened
            # before a repair moved the database aside would read the old file: open anew.
            local.con, local.pid, local.tuned, local.generation = None, os.getpid(), False, self._generation
        con: sqlite3.Connection | None = local.con
        if con is None:
            # mode=rw: never create a database here (a missing one is the full open's job).
            uri = "file:" + _quote(self.db_path) + "?mode=rw"
            con = local.con = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
        return con

    def get(self, key: str) -> Any:
        """The value under ``key`` (bytes or an int counter), or None; SQLite errors propagate."""
        now = time.time()
        con = self._connection()
        row = con.execute(_SELECT, (key, now)).fetchone()
        if row is None:
            return None
        rowid, mode, filename, value, used = row
        try:
            out = self.disk.fetch(mode, filename, value, False)
        except OSError:  # deleted between the row and its file: diskcache's answer is a miss too
            return None
        if not isinstance(used, (int, float)) or now - used > TOUCH_AFTER:
            self._touch(con, rowid, now)
        return out

    def _touch(self, con: sqlite3.Connection, rowid: int, now: float) -> None:
        """Mark the row used (LRU); a busy or read-only store just keeps the old time."""
        try:
            self._write(con, _TOUCH, (now, rowid))
        except sqlite3.OperationalError:
            pass

    def add(self, key: str, delta: int) -> bool:
        """Add ``delta`` to the counter row ``key`` as diskcache's ``incr`` would (value, store and
        access time), in one statement. False when there is no sane counter row to add to (the
        caller then goes through diskcache, which creates or resets it); SQLite errors propagate."""
        now = time.time()
        cursor = self._write(self._connection(), _ADD, (delta, now, now, key, _COUNTER_MAX - delta))
        return cursor.rowcount == 1

    def _write(self, con: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
        if not self._local.tuned:
            con.execute("PRAGMA synchronous = 0")  # the store's setting: see _store.store_settings
            self._local.tuned = True
        return con.execute(sql, args)

    def close(self) -> None:
        """Close this thread's connection; other threads open a new one at their next lookup."""
        self._generation += 1
        con = getattr(self._local, "con", None)
        if con is not None and getattr(self._local, "pid", None) == os.getpid():
            self._local.con = None
            try:
                con.close()
            except sqlite3.Error:
                pass


def _quote(path: str) -> str:
    """A path for a SQLite ``file:`` URI (``?`` and ``#`` would end the path part)."""
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")

"""Where cache values live: a diskcache directory, or memory when disk is unusable.

Both backends hold opaque ``bytes`` under ``str`` keys. The disk backend uses a
``diskcache.Disk`` that refuses to pickle or unpickle anything: a writable,
shared cache directory must never be a way to run code (CVE-2025-69872). It
also refuses blob file names that point outside the cache directory, so a
forged database row cannot make a lookup read, or a delete remove, any other
file; blob files are read only when they are regular files, never past the size
their entry declares. Settings other programs (or damage) left in diskcache's
Settings table are reset before diskcache applies them, and rows keyed by
anything but text are never read.

A database SQLite calls corrupt ("malformed", "not a database") is moved
aside, kept for inspection, and replaced by a fresh one into which every
still-readable, digest-valid entry is copied: one bad page costs the entries
on it, not the whole store.

No operation waits without bound for another process's SQLite write lock (a
writer stopped with Ctrl-Z or in a debugger, an ``sqlite3`` shell in a
transaction): see :class:`BoundedCache`.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import re
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeGuard, TypeVar

import diskcache
from diskcache.core import DBNAME, DEFAULT_SETTINGS, METADATA, MODE_BINARY, MODE_RAW

from .. import _fork, config
from ..errors import CacheError, EntryError
from ..errors import StoreBusy as StoreBusy  # re-exported: the store's callers catch it from here
from . import _entry
from ._locks import ProcessLock, share, shared_mode
from ._store_read import Reader

log = logging.getLogger("lazykern")
STORE_ERRORS = (OSError, sqlite3.Error, CacheError, diskcache.Timeout)
# What diskcache raises when it meets a row or setting it did not write (text where a number
# belongs, a huge integer ...): the row is bad, the store goes on.
FOREIGN = (TypeError, ValueError, OverflowError, UnicodeError, RecursionError, KeyError, IndexError, AttributeError)
COOL_DOWN = 60.0  # seconds a store that timed out fails at once, before it is waited for again
STAT_PREFIX = "lazykern:"
# diskcache's own naming: two hex levels, 28 hex chars, ".val".
_BLOB_RE = re.compile(r"^[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val$")
_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes)
_T = TypeVar("_T")


def is_corrupt(exc: BaseException) -> bool:
    """True for SQLite errors that mean the database file itself is damaged."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _CORRUPT_CODES
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def valid_blob_name(filename: Any) -> TypeGuard[str]:
    return isinstance(filename, str) and bool(_BLOB_RE.match(filename.replace(os.sep, "/")))


def read_blob(path: str) -> bytearray:
    """One entry file: regular files only, opened without following links or blocking, read bounded.

    A FIFO, a device or a link to ``/dev/zero`` put in place of a blob is refused
    instead of hanging or reading without end.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"blob {path} is not a regular file (refusing to read it)")
        if st.st_uid not in (os.geteuid(), 0) and not config.shared_cache_allowed():
            raise CacheError(f"blob {path} belongs to uid {st.st_uid}, not to you (refusing to load it)")
        try:
            return _entry.read_bounded(fh)
        except EntryError as exc:
            raise CacheError(f"blob {path} is not a lazykern entry: {exc}") from None


class NoPickleDisk(diskcache.Disk):  # type: ignore[misc]  # diskcache has no types: its Disk is Any
    """A diskcache ``Disk`` for bytes, str keys and int counters only."""

    def __init__(self, directory: str, min_file_size: Any = 1 << 15, **_foreign: Any) -> None:
        # Settings another Disk class left in the directory (JSONDisk's compress_level ...) are ignored.
        super().__init__(directory, min_file_size=_FILE_THRESHOLD)
        self._mode_bits: int | None = None

    @property
    def _mode(self) -> int:
        """The permission bits blob files get (:func:`shared_mode`), read at the first write: a process
        that only looks kernels up never needs them."""
        if self._mode_bits is None:
            self._mode_bits = shared_mode(self._directory)
        return self._mode_bits

    def put(self, key: Any) -> tuple[str, bool]:
        if not isinstance(key, str):
            raise CacheError(f"cache keys must be str, got {type(key).__name__}")
        db_key, raw = super().put(key)
        return db_key, raw

    def get(self, key: Any, raw: bool) -> object:
        if not raw:
            raise CacheError("refusing to unpickle a cache key (poisoned entry)")
        return super().get(key, raw)

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> tuple[int, int, str | None, object]:
        if read or not isinstance(value, (bytes, int)) or isinstance(value, bool):
            raise CacheError(f"cache values must be bytes, got {type(value).__name__}")
        columns: tuple[int, int, str | None, object] = super().store(value, read, key=key)
        if columns[2] is not None:  # a blob file and its two directory levels
            full = os.path.join(self._directory, columns[2])
            for path in (os.path.dirname(os.path.dirname(full)), os.path.dirname(full), full):
                share(path, self._mode)
        return columns

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> object:
        if mode == MODE_RAW:
            return super().fetch(mode, filename, value, False)
        if mode != MODE_BINARY:
            raise CacheError(f"refusing to decode a cache value stored in mode {mode} (pickle or text: poisoned entry)")
        if not valid_blob_name(filename):
            raise CacheError(f"refusing blob file name {filename!r} (not a cache file name: forged entry)")
        try:
            return read_blob(os.path.join(self._directory, filename))
        except FileNotFoundError:
            # diskcache would report a plain miss; a row without its file is damage.
            raise CacheError(f"blob file {filename} is missing") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise CacheError(f"blob file {filename} is not a regular file ({exc.strerror})") from None
            raise

    def remove(self, file_path: str) -> None:
        if valid_blob_name(file_path):
            super().remove(file_path)


def is_busy(exc: BaseException) -> bool:
    """True when a store operation gave up waiting for another process's lock (:class:`StoreBusy`,
    or diskcache's own ``Timeout`` from a call outside :class:`DiskBackend`)."""
    return isinstance(exc, (StoreBusy, diskcache.Timeout))


def _locked(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
    return str(exc).startswith(("database is locked", "database table is locked"))


class BoundedCache(diskcache.Cache):  # type: ignore[misc]  # diskcache has no types: its Cache is Any
    """diskcache with every wait for the database's write lock bounded by ``wait`` seconds.

    diskcache waits without end where a lock is held: ``retry=True`` loops on a busy
    ``BEGIN IMMEDIATE`` forever, and opening retries each settings write for 60 s. Here SQLite
    never waits by itself (busy timeout 0); every statement polls for at most ``wait`` seconds,
    then raises :class:`StoreBusy`, whose message is not the one diskcache's own retry loops
    catch, so they give up too. After a timeout, statements that meet the lock fail at once for
    ``COOL_DOWN`` seconds: a process whose store is held pays the wait once a minute, not once
    per operation. Callers pass ``retry=False`` to every operation.
    """

    def __init__(self, directory: str, *, wait: float, **settings: Any) -> None:
        self._wait = wait
        self._busy_until = 0.0
        self._opening = True
        super().__init__(directory, timeout=0, **settings)
        self._opening = False

    @property
    def _sql(self) -> Callable[..., sqlite3.Cursor]:
        execute: Callable[..., sqlite3.Cursor] = self._con.execute

        def bounded(statement: str, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
            deadline, pause = None, 0.001
            while True:
                try:
                    return execute(statement, *args, **kwargs)
                except sqlite3.OperationalError as exc:
                    if isinstance(exc, StoreBusy) or not _locked(exc):
                        raise
                    if self._opening and _unchanged(execute, statement, args):
                        # diskcache rewrites every setting on open; one that already holds its value
                        # needs no lock, so a store held by another process still opens (and reads).
                        return execute("SELECT 0")
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + (0.0 if now < self._busy_until else self._wait)
                    if now >= deadline:
                        self._busy_until = now + COOL_DOWN
                        raise StoreBusy(
                            f"cache database in {self.directory!r} is held by another process: "
                            f"gave up after {self._wait:g} s (LAZYKERN_STORE_TIMEOUT sets the wait)"
                        ) from None
                    time.sleep(min(pause, deadline - now))
                    pause = min(pause * 2, 0.01)  # short: writers hold the lock for milliseconds

        return bounded


def _unchanged(execute: Callable[..., sqlite3.Cursor], statement: str, args: tuple[Any, ...]) -> bool:
    """Whether one of diskcache's settings writes on open would leave the Settings table as it is."""
    params: Any = args[0] if args else ()
    if statement.startswith("INSERT OR IGNORE INTO Settings"):
        key, _ = params
        return execute("SELECT 1 FROM Settings WHERE key = ?", (key,)).fetchone() is not None
    if statement.startswith("INSERT OR REPLACE INTO Settings"):
        key, value = params
    elif statement.startswith("UPDATE Settings SET value = ? WHERE key = ?"):
        value, key = params
    else:
        return False
    row = execute("SELECT value FROM Settings WHERE key = ?", (key,)).fetchone()
    return row is not None and row[0] == value and type(row[0]) is type(value)


class DiskBackend:
    """A diskcache directory that repairs a corrupt database instead of failing.

    ``on_reset(message)`` is called (once per repair, in the process that did
    it) after a corrupt database was moved aside. ``wait``: seconds any one
    operation waits for another process's write lock (default
    ``LAZYKERN_STORE_TIMEOUT``); past it the operation raises (:func:`is_busy`).
    """

    kind = "disk"

    def __init__(
        self,
        directory: str,
        size_limit: int,
        on_reset: Callable[[str], None] | None = None,
        *,
        wait: float | None = None,
    ) -> None:
        self.directory = directory
        self.size_limit = size_limit
        self.on_reset = on_reset
        self.wait = config.store_timeout() if wait is None else wait
        self.quarantined: list[str] = []
        self._swap = _fork.lock()
        self._opening = _fork.lock()
        self._db_path = os.path.join(directory, DBNAME)
        self._cache: diskcache.Cache | None = None
        self._ino: int | None = None
        # A store that exists and can be written is opened on first write: lookups read it
        # with one SELECT each (_store_read). Anything else is opened now, so an unusable
        # directory is found here and the caller can fall back to memory.
        self._reader: Reader | None = None
        if _writable(directory) and _plain_database(self._db_path):
            self._reader = Reader(self._db_path, NoPickleDisk(directory), self.wait)
        else:
            self._full()

    @property
    def cache(self) -> diskcache.Cache:
        """The diskcache store, opened (settings checked, tables made) on first use."""
        cache = self._cache
        return cache if cache is not None else self._full()

    def _full(self) -> diskcache.Cache:
        with self._opening:
            if self._cache is None:
                tried = _inode(self._db_path)
                try:
                    self._cache, self._ino = self._open()
                except sqlite3.DatabaseError as exc:
                    if not is_corrupt(exc):
                        raise
                    self._ino = tried
                    self._recover(exc)
            assert self._cache is not None  # _open or _recover set it, or raised
            return self._cache

    def _open(self) -> tuple[diskcache.Cache, int | None]:
        fixed = _sanitize_settings(self._db_path, self.wait)
        if fixed and self.on_reset is not None:
            self.on_reset(
                f"lazykern cache database {self._db_path!r} held settings it does not write ({fixed}); "
                "reset them to lazykern's own."
            )
        cache = BoundedCache(self.directory, wait=self.wait, disk=NoPickleDisk, **store_settings(self.size_limit))
        mode = shared_mode(self.directory)
        for suffix in ("", "-wal", "-shm"):
            share(self._db_path + suffix, mode)
        return cache, _inode(self._db_path)

    def _run(self, op: Callable[[diskcache.Cache], _T]) -> _T:
        """Run ``op`` on the database; on corruption, repair it once and retry."""
        cache = self.cache
        try:
            return op(cache)
        except diskcache.Timeout:  # a busy BEGIN IMMEDIATE (operations run with retry=False)
            raise StoreBusy(
                f"cache database {self._db_path!r} is held by another process: "
                f"gave up after {self.wait:g} s (LAZYKERN_STORE_TIMEOUT sets the wait)"
            ) from None
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            self._recover(exc, cache)
            return op(self.cache)

    def _recover(self, exc: BaseException, broken: diskcache.Cache | None = None) -> None:
        """Move the corrupt database aside (unless another process did), salvage, reopen."""
        with self._swap:
            if broken is not None and self._cache is not broken:
                return  # another thread of this process already reopened it
            if self._cache is not None:
                _close_quietly(self._cache)
            if self._reader is not None:
                self._reader.close()
            with ProcessLock(self.directory, "_database", 60, log.warning):
                moved = None
                if _inode(self._db_path) == self._ino:
                    moved = self._move_aside()
                self._cache, self._ino = self._open()
                salvaged = self._salvage(moved) if moved else 0
        if moved:
            self.quarantined.append(moved)
            if self.on_reset is not None:
                self.on_reset(
                    f"lazykern cache database {self._db_path!r} was corrupt ({exc}); moved it to {moved!r} "
                    f"and started a fresh one with the {salvaged} intact entries it still held. "
                    "Other kernels will be recompiled when first used."
                )

    def _move_aside(self) -> str | None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = f"{self._db_path}.corrupt-{stamp}-{os.getpid()}"
        try:
            os.replace(self._db_path, target)
        except FileNotFoundError:
            return None
        for suffix in ("-wal", "-shm"):
            try:
                os.replace(self._db_path + suffix, target + suffix)
            except FileNotFoundError:
                pass
        return target

    def _salvage(self, broken_path: str) -> int:
        """Copy every readable, digest-valid entry of the broken database into the fresh one."""
        saved = 0
        for key, value in _readable_rows(broken_path, self.directory):
            try:
                _entry.decode(value)
                self.cache.set(key, value, retry=False)
                saved += 1
            except (EntryError, *STORE_ERRORS):
                continue
        return saved

    # -- operations ----------------------------------------------------------
    def get(self, key: str, touch: bool = True) -> Any:
        """The value under ``key``; ``touch=False`` reads it without marking it used (diskcache's
        ``get`` rewrites the access time under least-recently-used eviction: looking would change it)."""
        if not touch:
            return self._run(lambda c: _get_untouched(c, key))
        reader = self._reader
        if reader is not None:
            try:
                return reader.get(key)
            except sqlite3.Error:
                pass  # damaged or busy: the full open below repairs, retries or reports it
        return self._run(lambda c: c.get(key, default=None, retry=False))

    def set(self, key: str, value: bytes, tag: str | None = None) -> None:
        self._run(lambda c: c.set(key, value, tag=tag, retry=False))

    def delete(self, key: str) -> bool:
        return bool(self._run(lambda c: c.delete(key, retry=False)))

    def add(self, key: str, delta: int) -> bool:
        """Add ``delta`` to a sane counter row without opening diskcache (one UPDATE); False when
        that cannot be done here (no such row, no reader, a busy or damaged store): use :meth:`incr`."""
        reader = self._reader
        if reader is None or self._cache is not None:
            return False  # diskcache is open anyway: its incr costs nothing more
        try:
            return reader.add(key, delta)
        except sqlite3.Error:
            return False

    def incr(self, key: str, delta: int) -> bool:
        """Add ``delta`` to a counter row; a row that is not a sane integer is reset (returns False)."""
        try:
            value = self._run(lambda c: c.incr(key, delta, default=0, retry=False))
            if type(value) is int and 0 <= value < 1 << 62:
                return True
        except (TypeError, ValueError, OverflowError):
            pass
        self._run(lambda c: c.set(key, delta, retry=False))  # a counter row holds an int, not entry bytes
        return False

    def rows(self) -> list[tuple[str, int, float, float]]:
        """(key, size, store_time, access_time) of every text-keyed row, read from SQLite."""
        sql = (
            "SELECT key, COALESCE(size, 0), COALESCE(store_time, 0), COALESCE(access_time, 0) FROM Cache"
            " WHERE raw = 1 AND typeof(key) = 'text'"
        )
        return [
            (key, _num(size), _num(stored), _num(used))
            for key, size, stored, used in self._run(lambda c: sql_of(c)(sql).fetchall())
        ]

    def volume(self) -> int:
        return int(self._run(lambda c: c.volume()))

    def __len__(self) -> int:
        return self._run(len)

    def clear(self) -> None:
        self._run(lambda c: c.clear(retry=False))

    def cull(self, size_limit: int) -> int:
        def op(c: diskcache.Cache) -> int:
            old = c.size_limit
            c.reset("size_limit", size_limit)
            try:
                culled: int = c.cull(retry=False)
                return culled
            finally:
                c.reset("size_limit", old)

        return self._run(op)

    def check(self, repair: bool, min_age: float) -> dict[str, Any]:
        """Database integrity, rows against files, stale locks; fixed when ``repair``.

        Unlike ``diskcache.Cache.check(fix=True)`` this never deletes lock
        files that are held, files younger than ``min_age`` seconds (a writer
        stores its blob file before the row that names it), or anything that
        is not a blob file of this cache.
        """
        report: dict[str, Any] = {"integrity": "ok", "quarantined": None, "missing_files": 0, "orphan_files": 0}
        try:
            rows = self._run(lambda c: sql_of(c)("PRAGMA integrity_check").fetchall())
            problems = [r[0] for r in rows if r[0] != "ok"]
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
        if problems:
            report["integrity"] = "; ".join(problems[:5])
            if repair:
                self._recover(sqlite3.DatabaseError(report["integrity"]), self.cache)
                report["quarantined"] = self.quarantined[-1] if self.quarantined else None
        now = time.time()
        referenced = set()
        dangling = []
        for rowid, filename in self._run(
            lambda c: sql_of(c)("SELECT rowid, filename FROM Cache WHERE filename IS NOT NULL").fetchall()
        ):
            full = os.path.join(self.directory, filename) if valid_blob_name(filename) else None
            if full is None or not os.path.isfile(full):
                dangling.append(rowid)
            else:
                referenced.add(os.path.normpath(full))
        report["missing_files"] = len(dangling)
        if repair and dangling:
            self._run(lambda c: _delete_rowids(c, dangling))
        orphans = [
            p
            for p in blob_files(self.directory)
            if os.path.normpath(p) not in referenced and file_age(p, now) >= min_age
        ]
        report["orphan_files"] = len(orphans)
        if repair:
            for path in orphans:
                _unlink(path)
                _rmdirs(os.path.dirname(path), self.directory)
            self._run(_fix_settings)
        return report

    def foreign_rows(self, repair: bool) -> int:
        """Rows with pickled keys: never read, counted, and dropped when ``repair``."""
        rows = self._run(lambda c: sql_of(c)("SELECT rowid FROM Cache WHERE raw = 0").fetchall())
        if repair and rows:
            self._run(lambda c: _delete_rowids(c, [r[0] for r in rows]))
        return len(rows)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        _close_quietly(self._cache)


def _writable(path: str) -> bool:
    return os.access(path, os.W_OK)


def _plain_database(db_path: str) -> bool:
    """``cache.db`` is a writable regular file and its ``-wal`` / ``-shm`` are regular files or absent:
    only then may lookups skip the full open (which finds, repairs or reports anything else)."""
    for path, needed in ((db_path, True), (db_path + "-wal", False), (db_path + "-shm", False)):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            if needed:
                return False
            continue
        except OSError:
            return False
        if not stat.S_ISREG(mode):
            return False
    return _writable(db_path)


_FILE_THRESHOLD = 1 << 15  # diskcache's default: larger values go to their own file


def store_settings(size_limit: int) -> dict[str, Any]:
    """Every diskcache setting, given explicitly: what another program left in the table never applies."""
    return dict(
        DEFAULT_SETTINGS,
        size_limit=size_limit,
        eviction_policy="least-recently-used",
        cull_limit=1,  # evict one LRU entry per write, not ten at once
        statistics=0,
        tag_index=0,
        # No fsync: a process killed mid-write still leaves a sound database (WAL);
        # only an OS crash or power loss could corrupt it, and a corrupt store is
        # detected, set aside and rebuilt. Halves the open cost (3.5 -> 1.9 ms),
        # which every fresh process pays before its first kernel.
        sqlite_synchronous=0,
        disk_min_file_size=_FILE_THRESHOLD,
        disk_pickle_protocol=DEFAULT_SETTINGS["disk_pickle_protocol"],
    )


def _sanitize_settings(db_path: str, wait: float) -> str:
    """Remove Settings rows diskcache would apply blindly (pragmas, attributes, Disk arguments).

    diskcache turns every row of its Settings table into a PRAGMA, an attribute of
    the Cache, or an argument of the Disk class; a row another program (or damage)
    left there could make every open fail. Known settings are overwritten on open;
    unknown ones are deleted here, and the running count/size are recomputed when
    they are not integers. Returns what was fixed ("" when nothing was).
    """
    if not os.path.isfile(db_path):
        return ""
    ours = store_settings(0)
    known = set(ours) | set(METADATA)
    fixed: list[str] = []
    con = sqlite3.connect(db_path, timeout=wait, isolation_level=None)
    try:
        try:
            rows = con.execute("SELECT key, value FROM Settings").fetchall()
        except sqlite3.OperationalError:
            return ""  # no table yet (or not ours to read): diskcache creates it
        for key, value in rows:
            if key not in known:
                con.execute("DELETE FROM Settings WHERE key IS ?", (key,))
                fixed.append(str(key)[:40])
            elif key.startswith("sqlite_") and value != ours[key]:
                # diskcache re-applies these as PRAGMAs on every new connection, before our values.
                con.execute("UPDATE Settings SET value = ? WHERE key = ?", (ours[key], key))
                fixed.append(key)
            elif key in METADATA and not (type(value) is int and 0 <= value < 1 << 62):
                con.execute("UPDATE Settings SET value = ? WHERE key = ?", (_recount(con, key), key))
                fixed.append(key)
    finally:
        con.close()
    return ", ".join(fixed)


def _recount(con: sqlite3.Connection, key: str) -> int:
    try:
        if key == "count":
            return int(con.execute("SELECT COUNT(*) FROM Cache").fetchone()[0])
        if key == "size":
            return int(
                con.execute("SELECT COALESCE(SUM(size), 0) FROM Cache WHERE typeof(size) = 'integer'").fetchone()[0]
            )
    except sqlite3.Error:
        pass
    return 0


def _readable_rows(path: str, directory: str) -> Iterator[tuple[str, bytes]]:
    """(key, value) of the str-keyed bytes rows SQLite can still read from a damaged file.

    Row ids are gathered from every index and from the table itself (each
    scan keeps what it read before hitting a bad page), then each row is read
    on its own, so a few bad pages cost only the rows on them.
    """
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return
    try:
        rowids: set[int] = set()
        for source in ("INDEXED BY Cache_key_raw", "INDEXED BY Cache_access_time", "INDEXED BY Cache_expire_time", ""):
            try:
                for (rowid,) in con.execute(f"SELECT rowid FROM Cache {source}"):
                    rowids.add(rowid)
            except sqlite3.Error:
                continue
        for rowid in sorted(rowids):
            try:
                row = con.execute(
                    "SELECT key, raw, mode, filename, value FROM Cache WHERE rowid = ?", (rowid,)
                ).fetchone()
            except sqlite3.Error:
                continue
            if row is None:
                continue
            key, raw, mode, filename, value = row
            if raw != 1 or not isinstance(key, str) or key.startswith(STAT_PREFIX):
                continue
            data = _row_bytes(mode, filename, value, directory)
            if data is not None:
                yield key, data
    finally:
        con.close()


def _row_bytes(mode: Any, filename: Any, value: Any, directory: str) -> bytes | None:
    if mode == MODE_RAW and isinstance(value, bytes):
        return value
    if mode == MODE_BINARY and valid_blob_name(filename):
        try:
            return bytes(read_blob(os.path.join(directory, filename)))
        except (OSError, CacheError):
            return None
    return None


# diskcache's private parts, reached through these two functions only (tests/test_store_diskcache.py
# checks both against the installed diskcache): it has no public way to run SQL on its connection
# (repair, listings) or to remove a blob file by the name a row gives.
def sql_of(cache: diskcache.Cache) -> Callable[..., sqlite3.Cursor]:
    """``cache._sql``: runs one statement on the cache's connection, returns the cursor."""
    sql: Callable[..., sqlite3.Cursor] = cache._sql
    return sql


def disk_of(cache: diskcache.Cache) -> diskcache.Disk:
    """``cache._disk``: the Disk that reads, writes and removes the cache's blob files."""
    return cache._disk


def _num(value: Any) -> Any:
    """A number column as a finite number (another program may have written text there)."""
    return value if isinstance(value, (int, float)) and value == value and abs(value) < 1e18 else 0


def _get_untouched(cache: diskcache.Cache, key: str) -> Any:
    """diskcache's own fast read path (``Cache.get`` with no statistics and no eviction update)."""
    disk = disk_of(cache)
    db_key, raw = disk.put(key)
    rows = sql_of(cache)(
        "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = ?"
        " AND (expire_time IS NULL OR expire_time > ?)",
        (db_key, raw, time.time()),
    ).fetchall()
    if not rows:
        return None
    ((mode, filename, value),) = rows
    return disk.fetch(mode, filename, value, False)


def _delete_rowids(cache: diskcache.Cache, rowids: list[int]) -> None:
    with cache.transact(retry=False):
        sql = sql_of(cache)
        for rowid in rowids:
            row = sql("SELECT filename FROM Cache WHERE rowid = ?", (rowid,)).fetchone()
            sql("DELETE FROM Cache WHERE rowid = ?", (rowid,))
            if row and row[0]:
                disk_of(cache).remove(row[0])


def _fix_settings(cache: diskcache.Cache) -> None:
    """Make diskcache's running count and size agree with the table (eviction uses them)."""
    with cache.transact(retry=False):
        sql = sql_of(cache)
        ((count,),) = sql("SELECT COUNT(key) FROM Cache").fetchall()
        ((size,),) = sql("SELECT COALESCE(SUM(size), 0) FROM Cache").fetchall()
        sql("UPDATE Settings SET value = ? WHERE key = ?", (count, "count"))
        sql("UPDATE Settings SET value = ? WHERE key = ?", (size, "size"))
    cache.reset("count")
    cache.reset("size")


def blob_files(directory: str) -> Iterator[str]:
    for top in os.listdir(directory):
        if not re.fullmatch(r"[0-9a-f]{2}", top):
            continue
        for root, _dirs, files in os.walk(os.path.join(directory, top)):
            for name in files:
                path = os.path.join(root, name)
                if valid_blob_name(os.path.relpath(path, directory)):
                    yield path


def file_age(path: str, now: float) -> float:
    try:
        return now - os.stat(path).st_mtime
    except OSError:
        return 0.0


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _rmdirs(path: str, stop: str) -> None:
    """Remove now-empty blob subdirectories up to (not including) ``stop``."""
    stop = os.path.normpath(stop)
    while os.path.normpath(path) != stop and path.startswith(stop):
        try:
            os.rmdir(path)
        except OSError:
            return
        path = os.path.dirname(path)


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _close_quietly(cache: diskcache.Cache | None) -> None:
    if cache is None:
        return
    try:
        cache.close()
    except sqlite3.Error:
        pass


class MemoryBackend:
    """An LRU dict, used when the disk tier is off or unusable."""

    kind = "memory"
    directory = None
    quarantined: tuple[str, ...] = ()

    def __init__(self, size_limit: int) -> None:
        self.size_limit = size_limit
        self.data: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self.times: dict[str, tuple[float, float]] = {}
        self.lock = _fork.lock()

    def get(self, key: str, touch: bool = True) -> Any:
        with self.lock:
            value = self.data.get(key)
            if value is not None and touch:
                self.data.move_to_end(key)
                stored, _ = self.times.get(key, (0.0, 0.0))
                self.times[key] = (stored, time.time())
            return value

    def set(self, key: str, value: bytes, tag: str | None = None) -> None:
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

    def add(self, key: str, delta: int) -> bool:
        return False  # incr is as cheap

    def incr(self, key: str, delta: int) -> bool:
        with self.lock:
            self.data[key] = int(self.data.get(key, 0)) + delta
        return True

    def rows(self) -> list[tuple[str, int, float, float]]:
        out = []
        for key, value in list(self.data.items()):
            if isinstance(value, bytes):
                stored, used = self.times.get(key, (0.0, 0.0))
                out.append((key, len(value), stored, used))
        return out

    def volume(self) -> int:
        return sum(len(v) for v in self.data.values() if isinstance(v, bytes))

    def __len__(self) -> int:
        return len(self.data)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()
            self.times.clear()

    def check(self, repair: bool, min_age: float) -> dict[str, Any]:
        return {"integrity": "ok", "quarantined": None, "missing_files": 0, "orphan_files": 0}

    def foreign_rows(self, repair: bool) -> int:
        return 0

    def close(self) -> None:
        pass

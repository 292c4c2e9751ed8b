"""The kernel store: compiled binaries on disk, keyed by everything that made them.

``KernelCache`` implements cuda.core's ``ProgramCacheResource`` (bytes in,
bytes out), so it can be handed to ``Program.compile(cache=...)``; lazykern
itself uses :meth:`KernelCache.get_or_compile`, which also keeps a metadata
record per entry and makes sure a key is compiled once even when threads and
processes ask for it at the same moment.

Use :meth:`lookup`/``get`` to ask "is it there" and "give it to me" in one
step: there is deliberately no ``__contains__``, whose check-then-read idiom
races with other processes and with eviction.

Nothing the store returns is trusted: every entry carries the sha256 of its
binary and the key it was stored under, both checked on every read, so a
truncated, flipped, swapped or forged entry is dropped and recompiled, never
loaded. :meth:`KernelCache.check` verifies and repairs a whole store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

import filelock

from . import _entry, _fork, config
from ._locks import LOCK_DIR, NullLock, ProcessLock
from ._store import STORE_ERRORS, DiskBackend, MemoryBackend, StoreBusy, is_busy
from .errors import CacheError, LazykernWarning, warn_user

try:
    from cuda.core.utils import ProgramCacheResource
except ImportError:  # cuda.core < 1.2: same interface, our own base
    import abc

    class ProgramCacheResource(abc.ABC):  # type: ignore[no-redef]  # noqa: B024
        def get(self, key, default=None):
            try:
                return self[key]
            except KeyError:
                return default

        def close(self) -> None:  # noqa: B027
            """Release resources."""

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.close()


log = logging.getLogger("lazykern")

SCHEMA_VERSION = 2  # 2: one digest over header and code, strict header schema
_STAT = "lazykern:stat:"
_COUNTERS = ("lookups", "hits", "misses", "compiles", "compile_ms", "saved_ms", "corrupt")
# Every KernelCache of this process together, plus the simulator's instantiations:
# what lazykern.testing.assert_no_compile() watches.
_totals = dict.fromkeys(_COUNTERS, 0)
_totals_lock = _fork.lock()


def process_totals() -> dict[str, int]:
    """Lookups, hits, misses and compiles of every cache in this process so far."""
    with _totals_lock:
        return dict(_totals)


def record(name: str, delta: int = 1) -> None:
    """Add to this process's totals (the simulator's route, which stores nothing, reports here)."""
    with _totals_lock:
        _totals[name] += delta


def make_key(
    source: str,
    *,
    arch: str,
    options: Sequence[str] = (),
    target: str = "cubin",
    route: str = "nvrtc",
    extra: str = "",
    toolchain: str | None = None,
) -> str:
    """sha256 over every input that decides the binary, and nothing derived from the output.

    Options are hashed in their order; the NVRTC/CCCL versions and lazykern's
    schema version are part of the key, so an upgrade never returns an old entry.
    ``toolchain`` is :func:`lazykern.compiler.toolchain_fingerprint` (computed if
    not given; :meth:`KernelCache.toolchain` memoizes it per machine).
    """
    from .compiler import header_digest, toolchain_fingerprint

    if not isinstance(source, str):
        raise TypeError(f"source must be str, got {type(source).__name__}")
    for field, value in (("arch", arch), ("target", target), ("route", route), ("extra", extra)):
        if not isinstance(value, str):
            raise TypeError(f"{field} must be str, got {type(value).__name__} ({value!r})")
    if isinstance(options, (str, bytes)):
        raise TypeError(f"options must be a sequence of strings, got one {type(options).__name__}: wrap it in a list")
    record = {
        "schema": SCHEMA_VERSION,
        "source": hashlib.sha256(source.encode()).hexdigest(),
        "arch": arch,
        "options": list(options),
        "target": target,
        "route": route,
        "toolchain": toolchain or toolchain_fingerprint(),
        "headers": header_digest(source, options),
        "extra": extra,
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _norm_key(key: bytes | str) -> str:
    if isinstance(key, bytes):
        return key.hex()
    if isinstance(key, str):
        return key
    raise TypeError(f"cache keys must be bytes or str, got {type(key).__name__}")


class KernelCache(ProgramCacheResource):
    """A diskcache-backed store of compiled kernels, degrading to memory.

    ``directory`` defaults to ``LAZYKERN_CACHE_DIR``, ``size_limit`` to
    ``LAZYKERN_CACHE_SIZE``, ``enabled`` to ``LAZYKERN_CACHE``, and
    ``lock_timeout`` (seconds to wait for another process compiling the same
    key before compiling it too) to ``LAZYKERN_LOCK_TIMEOUT``. Nothing in the
    directory is trusted: damage is reported once (:class:`LazykernWarning`)
    and costs a recompile, never an exception.

    >>> import tempfile
    >>> kc = KernelCache(tempfile.mkdtemp())
    >>> kc["k"] = b"\\x7fELF..."
    >>> kc["k"]
    b'\\x7fELF...'
    >>> kc.stats()["entries"]
    1
    """

    def __init__(
        self,
        directory: str | os.PathLike | None = None,
        *,
        size_limit: int | str | None = None,
        enabled: bool | None = None,
        lock_timeout: float | None = None,
    ) -> None:
        self.size_limit = config.parse_size(size_limit) if size_limit is not None else config.cache_size_limit()
        self.lock_timeout = config.lock_timeout() if lock_timeout is None else lock_timeout
        enabled = config.disk_cache_enabled() if enabled is None else enabled
        self.requested_directory = os.fspath(directory) if directory is not None else config.default_cache_dir()
        self.degraded: str | None = None
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._count_lock = _fork.lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._key_locks_guard = _fork.lock()
        self._warned: set[str] = set()
        self._held: dict[str, _entry.Entry] = {}  # compiled while the store was held by another process
        if enabled:
            self._backend = self._open_disk(self.requested_directory)
        else:
            self._backend = MemoryBackend(self.size_limit)
            self.degraded = "disabled by LAZYKERN_CACHE"

    # -- opening ---------------------------------------------------------
    def _open_disk(self, directory: str) -> DiskBackend | MemoryBackend:
        try:
            _prepare_dir(directory)
            # diskcache writes its settings on open, so a read-only directory fails here.
            return DiskBackend(directory, self.size_limit, on_reset=lambda msg: self._warn_once("database", msg))
        except STORE_ERRORS as exc:
            self.degraded = f"{directory}: {exc}"
            self._warn_once(
                "open",
                f"lazykern cache directory {directory!r} is unusable ({exc}); "
                "compiled kernels are kept in memory for this process only. "
                "Set LAZYKERN_CACHE_DIR to a writable directory to persist them.",
            )
            return MemoryBackend(self.size_limit)

    def _warn_once(self, tag: str, message: str) -> None:
        if tag in self._warned:
            return
        self._warned.add(tag)
        log.warning(message)
        warn_user(message, LazykernWarning)

    # -- properties ------------------------------------------------------
    @property
    def directory(self) -> str | None:
        """The directory in use, or None when entries live in memory."""
        return self._backend.directory

    @property
    def backend(self) -> str:
        return self._backend.kind

    def toolchain(self) -> str:
        """The toolchain fingerprint, memoized in the store under a cheap stamp.

        Computing it loads NVRTC (~10 ms); a warm fresh process reads it back instead.
        """
        from .compiler import toolchain_fingerprint, toolchain_stamp

        memo = "lazykern:toolchain:" + toolchain_stamp()
        try:
            value = self._backend.get(memo)
            if isinstance(value, bytes) and _HEX64.fullmatch(value):
                return value.decode()
            if value is not None:
                self._warn_once(
                    "memo", f"lazykern cache row {memo!r} held garbage; recomputed the toolchain fingerprint."
                )
        except STORE_ERRORS:
            pass
        fingerprint = toolchain_fingerprint()
        try:
            self._backend.set(memo, fingerprint.encode())
        except STORE_ERRORS:
            pass
        return fingerprint

    # -- entries ---------------------------------------------------------
    def lookup(self, key: bytes | str, *, expect: dict[str, Any] | None = None) -> _entry.Entry | None:
        """The entry under ``key``, or None. Bad entries are dropped with one warning each.

        An entry is served only when its digest (over header and code) holds,
        its header passes the strict schema, names this key and this schema,
        and carries every field of ``expect`` (e.g. ``{"kernel": "f", "arch":
        "sm_90"}``) with the same value: a header without a field is refused.
        A store that cannot be read right now (locked, I/O error) is a miss.
        """
        key = _norm_key(key)
        try:
            return self._read(key, expect)
        except _BadEntry as first:
            try:  # another process may have replaced it meanwhile (a delete/store race)
                return self._read(key, expect)
            except _BadEntry:
                self._drop(key, first.reason)
                return None
        except STORE_ERRORS as exc:
            if is_busy(exc):
                self._warn_busy()
                return self._held.get(key)
            self._warn_once("read", f"lazykern could not read its cache at {self.directory!r} ({exc}); recompiling.")
            return None

    def peek(self, key: bytes | str) -> _entry.Entry | None:
        """The sound, current-version entry under ``key``, or None; unlike :meth:`lookup` it changes nothing."""
        try:
            return self._read(_norm_key(key), None)
        except (_BadEntry, *STORE_ERRORS):
            return None

    def _read(self, key: str, expect: dict[str, Any] | None, *, schema: bool = True) -> _entry.Entry | None:
        """The entry under ``key`` (None: no row); _BadEntry when it must not be served. No side effects."""
        try:
            blob = self._backend.get(key)
            if blob is None:
                return None
            entry = _entry.decode(blob)
        except _entry.StaleEntry as exc:
            raise _BadEntry(str(exc), stale=True) from None
        except StoreBusy:
            raise  # the store is held by another process: nothing is wrong with the entry
        except (CacheError, _entry.EntryError, *_FOREIGN) as exc:
            raise _BadEntry(str(exc) or type(exc).__name__) from None
        except OSError as exc:  # the blob file exists but cannot be read back
            raise _BadEntry(f"blob unreadable: {exc}") from None
        problem = _mismatch(key, entry.meta, expect, schema)
        if problem:
            raise _BadEntry(problem, stale=problem.endswith("(stale entry)"))
        return entry

    def _drop(self, key: str, reason: str) -> None:
        self._count("corrupt")
        self._warn_once(
            "corrupt:" + key,
            f"lazykern cache entry {key[:16]}... is unreadable ({reason}); it was dropped and will be recompiled.",
        )
        try:
            self._backend.delete(key)
        except (*STORE_ERRORS, *_FOREIGN):
            pass

    def store(self, key: bytes | str, code: bytes, meta: dict[str, Any] | None = None) -> None:
        """Write ``code`` with its metadata. A failing disk is reported once, never raised."""
        key = _norm_key(key)
        meta = dict(meta or {})
        meta.setdefault("created", time.time())
        meta.setdefault("schema", SCHEMA_VERSION)
        meta["key"] = key
        try:
            blob = _entry.encode(code, meta)
        except _entry.EntryError as exc:
            raise CacheError(f"cannot store entry {key[:16]}...: {exc}") from None
        if len(blob) > self.size_limit:
            self._warn_too_small(len(blob))
            return
        try:
            self._backend.set(key, blob, tag=meta.get("family"))
            if self._backend.get(key) is None:  # evicted at once: the store holds nothing else
                self._warn_too_small(len(blob))
        except (*STORE_ERRORS, *_FOREIGN) as exc:
            if is_busy(exc):
                self._warn_busy()
                self._held[key] = _entry.Entry(code, meta)
                return
            self._warn_once(
                "write",
                f"lazykern could not write to its cache at {self.directory!r} ({exc}); "
                "newly compiled kernels will not persist. Free disk space or set LAZYKERN_CACHE_DIR.",
            )

    def _warn_busy(self) -> None:
        self._warn_once(
            "busy",
            f"lazykern's cache database in {self.directory!r} is held by another process (a writer stopped "
            "with Ctrl-Z or in a debugger, an sqlite3 shell in a transaction); kernels are compiled and kept "
            "in memory until it is free. LAZYKERN_STORE_TIMEOUT sets how long to wait for it.",
        )

    def _warn_too_small(self, size: int) -> None:
        self._warn_once(
            "size",
            f"lazykern cache size limit ({self.size_limit} bytes) is too small for a compiled kernel "
            f"({size} bytes) plus the store's own database; kernels will not persist. "
            "Raise LAZYKERN_CACHE_SIZE (e.g. 2G).",
        )

    def get_or_compile(
        self,
        key: str,
        compile_fn: Callable[[], tuple[bytes, dict[str, Any]]],
        *,
        expect: dict[str, Any] | None = None,
        also: Sequence[str] = (),
    ) -> tuple[_entry.Entry, bool]:
        """Return ``(entry, compiled_now)``; compile under a per-key lock on a miss.

        Threads wait on an in-process lock; processes sharing the directory
        wait on a file lock, so each key is compiled about once overall.
        ``expect`` is checked against a stored entry's header (see :meth:`lookup`).
        ``also``: keys of entries that serve as well when found (never compiled).
        Each call counts one lookup and then one hit or one miss.
        """
        self._count("lookups")
        entry = self.lookup(key, expect=expect)
        for other in also:
            if entry is not None:
                break
            entry = self.lookup(other, expect=expect)
        if entry is not None:
            self._hit(entry)
            return entry, False
        with self._thread_lock(key), self._process_lock(key):
            entry = self.lookup(key, expect=expect)
            if entry is not None:
                self._hit(entry)
                return entry, False
            self._count("misses")
            start = time.perf_counter()
            code, meta = compile_fn()
            seconds = time.perf_counter() - start
            meta = dict(meta)
            meta.setdefault("compile_seconds", round(seconds, 6))
            self._count("compiles")
            self._count("compile_ms", int(meta["compile_seconds"] * 1000))
            self.store(key, code, meta)
            return _entry.Entry(code, {**meta, "key": key}), True

    def _hit(self, entry: _entry.Entry) -> None:
        self._count("hits")
        self._count("saved_ms", int(entry.compile_seconds * 1000))

    def _thread_lock(self, key: str) -> threading.Lock:
        with self._key_locks_guard:
            return self._key_locks.setdefault(key, _fork.lock())

    def _process_lock(self, key: str) -> ProcessLock | NullLock:
        if self.directory is None:
            return NullLock()
        name = hashlib.sha256(key.encode()).hexdigest()[:40]
        return ProcessLock(self.directory, name, self.lock_timeout, lambda msg: self._warn_once("lock", msg))

    def _count(self, name: str, delta: int = 1) -> None:
        with self._count_lock:
            self._counts[name] += delta
        record(name, delta)
        if name == "lookups":  # not persisted: hits + misses, and a write less on the warm path
            return
        try:
            sane = self._backend.incr(_STAT + name, delta)
        except (*STORE_ERRORS, *_FOREIGN):
            return
        if not sane:
            self._warn_once("counter", f"lazykern cache counter {_STAT + name!r} held garbage; it was reset.")

    # -- ProgramCacheResource --------------------------------------------
    def __getitem__(self, key: bytes | str) -> bytes:
        entry = self.lookup(key)
        if entry is None:
            raise KeyError(key)
        return entry.code

    def __setitem__(self, key: bytes | str, value: Any) -> None:
        code = getattr(value, "code", value)  # a cuda.core ObjectCode carries .code
        if isinstance(code, str):
            code = code.encode()
        if not isinstance(code, (bytes, bytearray, memoryview)):
            raise CacheError(f"cache values must be bytes or ObjectCode, got {type(value).__name__}")
        self.store(key, bytes(code), {"source": "cuda.core"})

    def __delitem__(self, key: bytes | str) -> None:
        if not self._backend.delete(_norm_key(key)):
            raise KeyError(key)

    def __len__(self) -> int:
        return sum(1 for _ in self.entries())

    def clear(self) -> None:
        self._backend.clear()

    def close(self) -> None:
        self._backend.close()

    # -- inspection -------------------------------------------------------
    def entries(self) -> Iterator[dict[str, Any]]:
        """One dict per stored kernel: key, size, times, ``stale`` and its header.

        Read only: an entry written by another lazykern version is listed with
        ``stale=True``; a row that is not a sound entry is skipped (``check``
        reports it). Nothing is deleted.
        """
        for key, size, stored, used in self._rows():
            if key.startswith(_STAT_ROOT):
                continue
            try:
                entry = self._read(key, None, schema=False)
            except _BadEntry as exc:
                if exc.stale:
                    yield {"key": key, "bytes": size, "stored": stored, "last_used": used, "stale": True}
                continue
            except STORE_ERRORS:
                continue
            if entry is None:
                continue
            stale = entry.meta.get("schema") != SCHEMA_VERSION
            row = {**entry.meta, "key": key, "bytes": len(entry.code), "stored": stored, "last_used": used}
            yield {**row, "stale": stale}

    def _rows(self) -> list[tuple[str, int, float, float]]:
        try:
            return list(self._backend.rows())
        except (*STORE_ERRORS, *_FOREIGN) as exc:
            self._warn_once("read", f"lazykern could not read its cache at {self.directory!r} ({exc}).")
            return []

    def delete(self, key: str) -> bool:
        return self._backend.delete(_norm_key(key))

    def check(self, repair: bool = False, *, min_age: float = 60.0) -> dict[str, Any]:
        """Verify the whole store; with ``repair``, fix what is wrong. Returns a report.

        Checks SQLite's integrity (a corrupt database is moved aside and
        rebuilt from its readable entries), every entry's digest and header,
        rows whose blob file is gone, blob files no row names (orphans of a
        killed writer), rows with pickled keys, and lock files nobody holds.
        Entries of other lazykern versions are counted (``stale_entries``) and
        left alone. Files younger than ``min_age`` seconds are left alone: a
        concurrent writer creates its blob file just before the row that names
        it. ``diskcache.Cache.check(fix=True)`` is not used: it would delete
        held lock files.
        """
        report: dict[str, Any] = {"directory": self.directory, "backend": self.backend, "repaired": repair}
        report.update(self._backend.check(repair, min_age))
        bad: list[str] = []
        stale = 0
        rows = [row for row in self._rows() if not row[0].startswith(_STAT_ROOT)]
        for key, *_ in rows:
            try:
                entry = self._read(key, None, schema=False)
                stale += entry is not None and entry.meta.get("schema") != SCHEMA_VERSION
            except _BadEntry as exc:
                if exc.stale:
                    stale += 1
                    continue
                bad.append(key)
                log.info("cache check: entry %s is bad: %s", key[:16], exc.reason)
                if repair:
                    self._backend.delete(key)
            except STORE_ERRORS as exc:
                bad.append(key)
                log.info("cache check: entry %s is unreadable: %s", key[:16], exc)
        report["entries"] = len(rows)
        report["stale_entries"] = stale
        report["bad_entries"] = bad
        report["foreign_rows"] = self._backend.foreign_rows(repair)
        report["stale_locks"] = self._stale_locks(repair, min_age)
        report["quarantined_files"] = _quarantined_files(self.directory)
        found = bool(
            bad
            or report["integrity"] != "ok"
            or report["missing_files"]
            or report["orphan_files"]
            or report["foreign_rows"]
        )
        # The counts say what was found; "ok" says whether the store is sound now.
        report["ok"] = not found or (repair and (report["integrity"] == "ok" or bool(report.get("quarantined"))))
        return report

    def _stale_locks(self, repair: bool, min_age: float) -> int:
        """Lock files older than ``min_age`` that no process holds (removed when ``repair``).

        A process that opened such a file just before it is unlinked can end up
        compiling alongside another one: a duplicate compile, never a wrong entry.
        """
        if self.directory is None:
            return 0
        lock_dir = os.path.join(self.directory, LOCK_DIR)
        try:
            names = [n for n in os.listdir(lock_dir) if n.endswith(".lock")]
        except OSError:
            return 0
        now, stale = time.time(), 0
        for name in names:
            path = os.path.join(lock_dir, name)
            try:
                if now - os.stat(path).st_mtime < min_age:
                    continue
                lock = filelock.FileLock(path, timeout=0)
                with lock:
                    stale += 1
                    if repair:
                        os.unlink(path)
            except (filelock.Timeout, OSError):
                continue
        return stale

    def cull(self, size_limit: int) -> int:
        return self._backend.cull(size_limit)

    def persistent_counters(self) -> dict[str, int]:
        """Counts of every process that used this store (lookups: hits + misses)."""
        out = {}
        for name in _COUNTERS:
            try:
                value = self._backend.get(_STAT + name)
            except (*STORE_ERRORS, *_FOREIGN):
                value = None
            out[name] = value if type(value) is int and 0 <= value < 1 << 62 else 0
        out["lookups"] = out["hits"] + out["misses"]
        return out

    def stats(self) -> dict[str, Any]:
        """This process's hits, misses, compiles and seconds, plus what the store holds."""
        with self._count_lock:
            c = dict(self._counts)
        rows = self._rows()
        try:
            volume = int(self._backend.volume())
        except (*STORE_ERRORS, *_FOREIGN):
            volume = sum(row[1] for row in rows)
        return {
            "lookups": c["lookups"],
            "hits": c["hits"],
            "misses": c["misses"],
            "compiles": c["compiles"],
            "compile_seconds": c["compile_ms"] / 1000,
            "seconds_saved": c["saved_ms"] / 1000,
            "corrupt": c["corrupt"],
            "entries": sum(1 for row in rows if not row[0].startswith(_STAT_ROOT)),
            "bytes": volume,
            "backend": self.backend,
            "directory": self.directory,
        }

    def __repr__(self) -> str:
        where = self.directory or "memory"
        return f"<KernelCache {where} limit={self.size_limit}>"

    def _repr_html_(self) -> str:
        s = self.stats()
        from html import escape

        rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in s.items())
        return f"<b>lazykern KernelCache</b><table>{rows}</table>"


_STAT_ROOT = "lazykern:"
_HEX64 = re.compile(rb"[0-9a-f]{64}")
# What diskcache raises when it meets a row or setting it did not write (text where a number
# belongs, a huge integer ...): the row is bad, the store goes on.
_FOREIGN = (TypeError, ValueError, OverflowError, UnicodeError, RecursionError, KeyError, IndexError, AttributeError)


class _BadEntry(Exception):
    def __init__(self, reason: str, *, stale: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stale = stale


def _mismatch(key: str, meta: dict[str, Any], expect: dict[str, Any] | None, schema: bool) -> str | None:
    """Why a decoded header does not belong to this request, or None when it does.

    The schema is part of every key, so a lookup never meets another schema's
    entry unless it was forged; listings skip that test, because entries of
    another lazykern version sharing the directory are valid for that version.
    """
    if meta.get("key") != key:
        return f"header names key {str(meta.get('key'))[:16]}..., not this one (swapped entry)"
    if schema and meta.get("schema") != SCHEMA_VERSION:
        return f"schema {meta.get('schema')!r}, this lazykern writes {SCHEMA_VERSION} (stale entry)"
    for field, want in (expect or {}).items():
        if field not in meta:
            return f"header lacks {field!r} (asked for {want!r})"
        if meta[field] != want:
            return f"header has {field}={meta[field]!r}, asked for {want!r}"
    return None


def _quarantined_files(directory: str | None) -> list[str]:
    if directory is None:
        return []
    try:
        return sorted(
            os.path.join(directory, n)
            for n in os.listdir(directory)
            if ".corrupt-" in n and not n.endswith(("-wal", "-shm"))
        )
    except OSError:
        return []


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def _user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside lazykern (the user's line)."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


_warned_dirs: set[str] = set()
_warned_dirs_lock = _fork.lock()


def _prepare_dir(directory: str) -> None:
    """Create the cache dir private to the user; warn (once per process) when others may write to it."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(f"{directory} exists and is not a directory")
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return
    mode = os.stat(directory).st_mode
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        with _warned_dirs_lock:
            real = os.path.realpath(directory)
            if real in _warned_dirs:
                return
            _warned_dirs.add(real)
        message = (
            f"lazykern cache directory {directory!r} is writable by other users; "
            "anyone who can write there can change the GPU code you run. Run: chmod go-w on it."
        )
        log.warning(message)
        warn_user(message, LazykernWarning)


_default: KernelCache | None = None
_default_lock = _fork.lock()


def default_cache() -> KernelCache:
    """The process-wide cache, opened from the environment on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = KernelCache()
        return _default


def set_default_cache(cache: KernelCache | None) -> None:
    """Replace the process-wide cache (None: reopen from the environment next time)."""
    global _default
    with _default_lock:
        _default = cache

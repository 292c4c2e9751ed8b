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

import gc
import hashlib
import json
import logging
import os
import shlex
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

import filelock

from .. import _fork, config
from ..compile import _manifest
from ..errors import CacheError, LazykernWarning, warn_user
from . import _entry, _later, _repair, _toolchain_memo
from ._locks import LOCK_DIR, NullLock, ProcessLock
from ._store import STORE_ERRORS, DiskBackend, MemoryBackend, StoreBusy, is_busy

if TYPE_CHECKING:
    from ._store_ro import ReadOnlyBackend

try:
    from cuda.core.utils import ProgramCacheResource
except ImportError:  # cuda.core < 1.2: same interface, our own base
    import abc

    class ProgramCacheResource(abc.ABC):  # type: ignore[no-redef]  # cuda.core's class when it has one
        @abc.abstractmethod
        def __getitem__(self, key: Any) -> Any: ...

        def get(self, key: Any, default: Any = None) -> Any:
            try:
                return self[key]
            except KeyError:
                return default

        def close(self) -> None:  # noqa: B027
            """Release resources."""

        def __enter__(self) -> ProgramCacheResource:
            return self

        def __exit__(self, *exc: object) -> None:
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
    not given; :meth:`KernelCache.toolchain` memoizes it per store and environment), and so are the
    toolkit's header directories. Headers are not read here: the entry records those NVRTC read, and every
    load verifies them (``lazykern.compile._manifest``), so computing a key opens no file.
    """
    from ..compile.compiler import system_include_dirs, toolchain_fingerprint

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
        # Where NVRTC finds toolkit headers: another environment's (a second venv, another CUDA
        # wheel) is another search, though the headers read here may still sit unchanged.
        "include_dirs": list(system_include_dirs()),
        "extra": extra,
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _norm_key(key: bytes | str) -> str:
    if isinstance(key, bytes):
        return key.hex()
    if isinstance(key, str):
        return key
    raise TypeError(f"cache keys must be bytes or str, got {type(key).__name__}")


@dataclass(frozen=True)
class Later:
    """What a compile function may give :meth:`KernelCache.get_or_compile` when a binary serves
    before the observed compile is done: ``code`` and ``meta`` serve now; ``finish()`` waits for the
    observation and gives what to store, ``(its binary, its header)`` (``memory_only`` in the
    header when the entry must not be stored): one compile's binary and its record, together."""

    code: bytes
    meta: dict[str, Any]
    finish: Callable[[], tuple[bytes, dict[str, Any]]]


class KernelCache(ProgramCacheResource):  # type: ignore[misc]  # cuda.core has no types: its base is Any
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
        directory: str | os.PathLike[str] | None = None,
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
        self._pending: dict[str, int] = {}  # counts not yet written to the store (_count)
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
        # The counts a hit only noted are written when this cache is collected or the process exits
        # (weakref.finalize runs at exit too), by the process that noted them, never a forked child.
        self._write_pending = weakref.finalize(
            self, _write_counts, self._backend, self._pending, self._count_lock, os.getpid()
        )

    # -- opening ---------------------------------------------------------
    def _open_disk(self, directory: str) -> DiskBackend | MemoryBackend | ReadOnlyBackend:
        try:
            _prepare_dir(directory)
            # An unusable directory fails here (a store it can write is opened on first write).
            # The backend outlives this cache in its finalizer (the hit counts): it refers back weakly.
            return DiskBackend(directory, self.size_limit, on_reset=_weak_warner(self, "database"))
        except STORE_ERRORS as exc:
            # A directory others control is never read: they could have placed any cubin there.
            # A read-only mount is served as it is; a writable directory whose SQLite files are broken is not
            # (memory, and `cache info --repair` fixes it).
            served = (
                None
                if isinstance(exc, _Untrusted) or _writable_store(directory)
                else _open_read_only(directory, self.size_limit)
            )
            if served is not None:
                self.degraded = (
                    f"{directory} cannot be written ({exc}): its kernels are served, new ones kept in memory"
                )
                self._warn_once(
                    "open",
                    f"lazykern cache directory {directory!r} cannot be written ({exc}); its kernels are used "
                    "as they are, and kernels compiled now are kept in memory for this process only. "
                    "Set LAZYKERN_CACHE_DIR to a writable directory to persist them.",
                )
                return served
            self.degraded = f"{directory}: {exc}"
            with _warned_dirs_lock:  # one warning per directory and cause in a process
                seen = (os.path.realpath(directory), str(exc)) in _warned_dirs
                _warned_dirs.add((os.path.realpath(directory), str(exc)))
            if not seen:
                self._warn_once(
                    "open",
                    f"lazykern cache directory {directory!r} is unusable ({exc}); "
                    "compiled kernels are kept in memory for this process only. "
                    "Set LAZYKERN_CACHE_DIR to a directory of your own to persist them.",
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
        """The toolchain fingerprint, memoized in the store by the stat of the files it stands for.

        Computing it loads NVRTC (~10 ms); a warm fresh process stats a few files instead
        (``lazykern.store._toolchain_memo``).
        """
        return _toolchain_memo.fingerprint(self.directory, lambda msg: self._warn_once("memo", msg))

    # -- entries ---------------------------------------------------------
    def lookup(
        self, key: bytes | str, *, expect: dict[str, Any] | None = None, headers: bool = False
    ) -> _entry.Entry | None:
        """The entry under ``key``, or None. Bad entries are dropped with one warning each.

        An entry is served only when its digest (over header and code) holds,
        its header passes the strict schema, names this key and this schema,
        and carries every field of ``expect`` (e.g. ``{"kernel": "f", "arch":
        "sm_90"}``) with the same value: a header without a field is refused.
        An entry that records the headers its compile read (``headers``; required
        when ``headers=True``) is served only while they still read the same
        (``lazykern.compile._manifest.verify``); otherwise it is a miss, and the compile
        that follows replaces it. A store that cannot be read right now (locked,
        I/O error) is a miss.
        """
        key = _norm_key(key)
        held = self._held.get(key)  # compiled while another process held the store: served from memory
        if held is not None:
            return held
        _later.wait_for(key)  # compiled here, its store waiting for the header trace: read what it wrote
        try:
            entry = self._read(key, expect)
            if entry is None:
                return None
        except _BadEntry as first:
            try:  # another process may have replaced it meanwhile (a delete/store race)
                entry = self._read(key, expect)
                if entry is None:
                    return None
            except _BadEntry:
                self._drop(key, first.reason)
                return None
        except STORE_ERRORS as exc:
            if is_busy(exc):
                self._warn_busy()
                return self._held.get(key)
            self._warn_once("read", f"lazykern could not read its cache at {self.directory!r} ({exc}); recompiling.")
            return None
        if entry.meta.get("memory_only"):  # a marker: never served, never an error, left in place
            log.debug("cache entry %s... is a memory-only marker: %s", key[:16], entry.meta["memory_only"])
            return None
        manifest = entry.meta.get("headers")
        if manifest is None:
            if headers:
                self._drop(key, "it does not record the headers its compile read")
                return None
            return entry
        try:
            stale, refreshed = _manifest.verify(manifest)
        except ValueError as exc:
            self._drop(key, str(exc))
            return None
        if stale:
            log.info("cache entry %s... not served: %s; recompiling", key[:16], stale)
            return None
        if refreshed is not None:  # headers touched, same bytes: later processes need not read them
            entry = _entry.Entry(entry.code, {**entry.meta, "headers": refreshed})
            try:  # opportunistic: a store that cannot be written (read-only) serves all the same
                self._backend.set(key, _entry.encode(entry.code, entry.meta), tag=entry.meta.get("family"))
            except (_entry.EntryError, *STORE_ERRORS, *_FOREIGN):
                pass
        return entry

    def peek(self, key: bytes | str) -> _entry.Entry | None:
        """The sound, current-version entry under ``key``, or None; unlike :meth:`lookup` it changes
        nothing, not even the entry's last-used time, and does not check the headers it records."""
        _later.wait_for(_norm_key(key))
        try:
            return self._read(_norm_key(key), None, touch=False)
        except (_BadEntry, *STORE_ERRORS):
            return None

    def _read(
        self, key: str, expect: dict[str, Any] | None, *, schema: bool = True, touch: bool = True
    ) -> _entry.Entry | None:
        """The entry under ``key`` (None: no row); _BadEntry when it must not be served.

        Only ``touch`` (a lookup that serves) marks the entry used; nothing else changes.
        """
        try:
            blob = self._backend.get(key, touch=touch)
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
        why = meta.get("memory_only")
        if why and code:  # only its marker (no code, never served) may be stored: `lazykern cache ls` shows it
            log.info("kernel %s is kept in memory only: %s", meta.get("kernel") or meta.get("name") or key[:16], why)
            return
        meta.setdefault("created", time.time())
        meta.setdefault("schema", SCHEMA_VERSION)
        meta["key"] = key
        try:
            blob = _entry.encode(code, meta)
        except _entry.EntryError as exc:
            # A legitimate compile is never lost: it is served from memory; only persisting it fails.
            self._warn_once(
                "entry-limits",
                f"lazykern cannot persist kernel {meta.get('kernel') or meta.get('name') or key[:16]!r}: {exc}; "
                "it is kept in memory for this process only.",
            )
            return
        if len(blob) > self.size_limit:
            self._warn_too_small(len(blob))
            return
        self._flush_counts()
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
        compile_fn: Callable[[], tuple[bytes, dict[str, Any]] | Later],
        *,
        expect: dict[str, Any] | None = None,
        also: Sequence[str] = (),
        check: Callable[[_entry.Entry], str | None] | None = None,
        headers: bool = False,
    ) -> tuple[_entry.Entry, bool]:
        """Return ``(entry, compiled_now)``; compile under a per-key lock on a miss.

        Threads wait on an in-process lock; processes sharing the directory
        wait on a file lock, so each key is compiled about once overall.
        ``expect`` is checked against a stored entry's header (see :meth:`lookup`).
        ``also``: keys of entries that serve as well when found (never compiled).
        ``check``: verifies a stored entry against this process (e.g. a manifest of what the
        compile read); an entry it gives a reason against is not served but compiled again
        and replaced. A compile whose header says ``memory_only`` (its code holds an address
        of this process) is served from memory and only a marker without code is stored.
        ``headers``: entries must record the headers their compile read (see :meth:`lookup`).
        A ``compile_fn`` that returns :class:`Later` is served at once and stored from a thread when
        its ``finish()`` returns (``_later``), the key's locks held until then.
        Each call counts one lookup and then one hit or one miss.
        """
        self._count("lookups")
        entry = self._checked(self.lookup(key, expect=expect, headers=headers), check)
        for other in also:
            if entry is not None:
                break
            entry = self._checked(self.lookup(other, expect=expect, headers=headers), check)
        if entry is not None:
            self._hit(entry)
            return entry, False
        with ExitStack() as locks:
            locks.enter_context(self._thread_lock(key))
            locks.enter_context(self._process_lock(key))
            entry = self._checked(self.lookup(key, expect=expect, headers=headers), check)
            if entry is not None:
                self._hit(entry)
                return entry, False
            self._count("misses")
            start = time.perf_counter()
            made = compile_fn()
            code, meta = (made.code, made.meta) if isinstance(made, Later) else made
            seconds = time.perf_counter() - start
            meta = dict(meta)
            meta.setdefault("compile_seconds", round(seconds, 6))
            self._count("compiles")
            self._count("compile_ms", int(meta["compile_seconds"] * 1000))
            if isinstance(made, Later):
                held = locks.pop_all()  # released by the store's thread, once the entry is written
                finish, took = made.finish, meta["compile_seconds"]
                _later.submit(key, lambda: self._store_later(key, finish, took, held))
            else:
                self._store_compiled(key, code, meta)
            return _entry.Entry(code, {**meta, "key": key}), True

    def _store_compiled(self, key: str, code: bytes, meta: dict[str, Any]) -> None:
        if meta.get("memory_only"):
            # Not an error: the marker lets `lazykern cache ls` show it; it is never served nor dropped.
            log.debug("%s is kept in memory only, never stored: %s", meta.get("name", key[:16]), meta["memory_only"])
            self.store(key, b"", meta)
        else:
            self.store(key, code, meta)

    def _store_later(
        self, key: str, finish: Callable[[], tuple[bytes, dict[str, Any]]], took: float, locks: ExitStack
    ) -> None:
        with locks:
            code, meta = finish()  # waits for the observed compile: other keys' stores go on meanwhile
            with _later.writing():
                self._store_compiled(key, code, {"compile_seconds": took, **meta})

    @staticmethod
    def _checked(entry: _entry.Entry | None, check: Callable[[_entry.Entry], str | None] | None) -> _entry.Entry | None:
        if entry is None or (check is None and not entry.meta.get("memory_only")):
            return entry
        reason = entry.meta.get("memory_only") or (check(entry) if check is not None else None)
        if reason:
            log.debug("lazykern: stored %s not served: %s", entry.meta.get("name", "entry"), reason)
            return None
        return entry

    def _hit(self, entry: _entry.Entry) -> None:
        self._count("hits")
        self._count("saved_ms", int(entry.compile_seconds * 1000))

    def _thread_lock(self, key: str) -> threading.Lock:
        with self._key_locks_guard:
            return self._key_locks.setdefault(key, _fork.lock())

    def _process_lock(self, key: str) -> ProcessLock | NullLock:
        directory = self.directory
        if directory is None or self.backend != "disk":  # memory, or a read-only store where no lock can be made
            return NullLock()
        name = hashlib.sha256(key.encode()).hexdigest()[:40]
        return ProcessLock(directory, name, self.lock_timeout, lambda msg: self._warn_once("lock", msg))

    def _count(self, name: str, delta: int = 1) -> None:
        with self._count_lock:
            self._counts[name] += delta
            deferred = name in _DEFERRED
            if deferred:  # a hit writes nothing: its counts go with the next write, or at exit
                self._pending[name] = self._pending.get(name, 0) + delta
        record(name, delta)
        if deferred or name == "lookups":  # not persisted: hits + misses, and a write less on the warm path
            return
        self._reset_warning(_add_count(self._backend, name, delta))

    def _flush_counts(self) -> None:
        """Write the counts a hit only noted (see ``_count``)."""
        for name in _write_counts(self._backend, self._pending, self._count_lock, os.getpid()):
            self._reset_warning(name)

    def _reset_warning(self, name: str | None) -> None:
        if name is not None:
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
        _later.wait_all()  # stores still waiting for a header trace write through this backend
        self._flush_counts()
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
                entry = self._read(key, None, schema=False, touch=False)
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
        _later.wait_all()  # what this process compiled is listed once its store is done
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
        store_problems, fixed, unfixed = self._check_directory(repair)
        report: dict[str, Any] = {"directory": self.directory, "backend": self.backend, "repaired": repair}
        report.update(store_problems=store_problems, fixed=fixed, unfixed=unfixed)
        report.update(self._backend.check(repair, min_age))
        bad: list[str] = []
        stale = 0
        rows = [row for row in self._rows() if not row[0].startswith(_STAT_ROOT)]
        for key, *_ in rows:
            try:
                entry = self._read(key, None, schema=False, touch=False)
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
            or store_problems
            or report["integrity"] != "ok"
            or report["missing_files"]
            or report["orphan_files"]
            or report["foreign_rows"]
        )
        # The counts say what was found; "ok" says whether the store is sound now.
        report["ok"] = not unfixed and (
            not found or (repair and (report["integrity"] == "ok" or bool(report.get("quarantined"))))
        )
        return report

    def _check_directory(self, repair: bool) -> tuple[list[str], list[str], list[str]]:
        """(problems that keep diskcache from opening or trusting the directory, fixed, not fixed).

        Repairs SQLite's own files and foreign schema objects (``lazykern.store._repair``), then reopens
        the directory: a store that fell back to memory is on disk again. A directory refused for
        its owner or permissions is never changed: that is the user's call, and the message says how.
        """
        if self.directory is None and (self.degraded is None or self.degraded.startswith("disabled")):
            return [], [], []
        directory = self.requested_directory
        try:
            _prepare_dir(directory)
        except CacheError as exc:
            return [f"{directory}: {exc}"], [], [f"{directory}: {exc}"]
        except OSError as exc:
            return [f"{directory}: {exc}"], [], [f"{directory} cannot be used ({exc}); set LAZYKERN_CACHE_DIR"]
        found = _repair.inspect(directory)
        if not repair or not found:
            return found, [], []
        self._backend.close()
        # A failed open leaves its SQLite connection to the collector, and SQLite shares a file's
        # lock and shared-memory state among a process's connections: let go of it before reopening.
        gc.collect()
        fixed, unfixed = _repair.repair(directory)
        self.degraded = None
        self._warned.discard("open")
        self._backend = self._open_disk(directory)
        if self.directory is None and not unfixed:
            unfixed.append(f"{directory} still cannot be opened: {self.degraded}")
        return found, fixed, unfixed

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
        self._flush_counts()
        out = {}
        for name in _COUNTERS:
            try:
                value = self._backend.get(_STAT + name, touch=False)
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
_DEFERRED = ("hits", "saved_ms")


def _weak_warner(cache: KernelCache, tag: str) -> Callable[[str], None]:
    """``cache._warn_once(tag, message)`` without keeping ``cache`` alive (a log line once it is gone)."""
    ref = weakref.ref(cache)

    def warn(message: str) -> None:
        target = ref()
        if target is None:
            log.warning(message)
        else:
            target._warn_once(tag, message)

    return warn


def _add_count(backend: DiskBackend | MemoryBackend | ReadOnlyBackend, name: str, delta: int) -> str | None:
    """Add to a persistent counter; ``name`` when its row held garbage and was reset, else None."""
    try:
        return None if backend.incr(_STAT + name, delta) else name
    except (*STORE_ERRORS, *_FOREIGN):
        return None


def _write_counts(
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
        if add(_STAT + name, delta):  # one UPDATE in place: diskcache is not opened for it
            continue
        bad = _add_count(backend, name, delta)
        if bad is not None:
            reset.append(bad)
    return reset


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


_warned_dirs: set[tuple[str, str]] = set()
_warned_dirs_lock = _fork.lock()


def _writable_store(directory: str) -> bool:
    db = os.path.join(directory, "cache.db")
    return os.access(directory, os.W_OK) and (not os.path.isfile(db) or os.access(db, os.W_OK))


class _Untrusted(CacheError):
    """A store directory (or its database) that another user controls: refused, never read."""


def _prepare_dir(directory: str) -> None:
    """Create the cache dir private to the user; refuse one that others control (CacheError says why).

    Like ssh and pip: a directory another user (not root) owns, or that others may write
    to without the sticky bit, lets them replace any kernel this process will run.
    ``LAZYKERN_SHARED_CACHE=1`` accepts it (a team cache shared on purpose).
    """
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(f"{directory} exists and is not a directory")
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return
    if config.shared_cache_allowed():
        return
    st = os.stat(directory)
    if st.st_uid not in (os.geteuid(), 0):  # as ssh: yours, or root's (who can change your code anyway)
        raise _Untrusted(
            f"it is owned by uid {st.st_uid}, not by you (uid {os.geteuid()}): that user could replace "
            "the GPU code you run. Use a directory of your own, or set LAZYKERN_SHARED_CACHE=1 to share it on purpose"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise _Untrusted(
            "other users can write to it: they could replace the GPU code you run. "
            f"Run: chmod go-w {shlex.quote(os.path.realpath(directory))}  "
            "(or set LAZYKERN_SHARED_CACHE=1 to share it on purpose)"
        )
    db_path = os.path.join(os.path.realpath(directory), "cache.db")
    try:  # the database left by a time the directory was shared
        db = os.stat(db_path)
    except OSError:
        return
    if db.st_uid not in (os.geteuid(), 0) or db.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _Untrusted(
            f"its cache.db is owned by uid {db.st_uid} or writable by others: they could replace the GPU code "
            f"you run. Run: mv {shlex.quote(db_path)} {shlex.quote(db_path + '.untrusted')}  (lazykern starts "
            "a fresh one), or set LAZYKERN_SHARED_CACHE=1"
        )


def _open_read_only(directory: str, size_limit: int) -> ReadOnlyBackend | None:
    """A read-only backend on the store in ``directory``, or None when none can be read."""
    from ._store_ro import ReadOnlyBackend  # import on first use: only a store that cannot be written needs it

    try:
        return ReadOnlyBackend(directory, size_limit)
    except STORE_ERRORS:
        return None


_default: KernelCache | None = None
_default_lock = _fork.lock()


def default_cache() -> KernelCache:
    """The process-wide cache, opened from the environment on first use."""
    global _default
    with _default_lock:
        if _default is None:
            config.check_settings()  # a mistyped LAZYKERN_* variable is reported at first use, whichever it is
            _default = KernelCache()
        return _default


def default_cache_if_made() -> KernelCache | None:
    """The process-wide cache if one was opened or set, else None (opens nothing): to put it back later."""
    with _default_lock:
        return _default


def set_default_cache(cache: KernelCache | None) -> None:
    """Replace the process-wide cache (None: reopen from the environment next time)."""
    global _default
    with _default_lock:
        _default = cache

"""The kernel store: compiled binaries on disk, keyed by everything that made them.

``KernelCache`` implements cuda.core's ``ProgramCacheResource`` (bytes in,
bytes out), so it can be handed to ``Program.compile(cache=...)``; lazykern
itself uses :meth:`KernelCache.get_or_compile`, which also keeps a metadata
record per entry and makes sure a key is compiled once even when threads and
processes ask for it at the same moment.

Use :meth:`lookup`/``get`` to ask "is it there" and "give it to me" in one
step: there is deliberately no ``__contains__``, whose check-then-read idiom
races with other processes and with eviction.

Nothing the store returns is trusted (``_lookup``): a truncated, flipped, swapped or forged entry
is dropped and recompiled, never loaded. :meth:`KernelCache.check` verifies and repairs a whole
store (``_check``). One concern per module: keys (``_keys``), reads and verification
(``_lookup``), compile-once (``_once``), counters (``_counters``), the directory's trust
(``_directory``), repair (``_check``, ``_repair``); this module puts them together.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .. import _fork, config
from ..errors import BadEntry, CacheError, LazykernWarning, UntrustedStore, warn_user
from . import _counters, _directory, _entry, _keys, _later, _toolchain_memo
from ._check import Checker
from ._counters import process_totals, record
from ._keys import SCHEMA_VERSION, make_key
from ._lookup import Lookup
from ._once import CompileOnce, Later
from ._store import FOREIGN, STORE_ERRORS, DiskBackend, MemoryBackend, is_busy

if TYPE_CHECKING:
    from ._store_ro import ReadOnlyBackend

__all__ = [
    "SCHEMA_VERSION",
    "KernelCache",
    "Later",
    "default_cache",
    "default_cache_if_made",
    "make_key",
    "process_totals",
    "record",
    "set_default_cache",
]

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


class KernelCache(Lookup, CompileOnce, Checker, ProgramCacheResource):  # type: ignore[misc]  # cuda.core has no types: its base is Any
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
        self._counts = dict.fromkeys(_counters.COUNTERS, 0)
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
            self, _counters.write_counts, self._backend, self._pending, self._count_lock, os.getpid()
        )

    # -- opening ---------------------------------------------------------
    def _open_disk(self, directory: str) -> DiskBackend | MemoryBackend | ReadOnlyBackend:
        try:
            _directory.prepare_dir(directory)
            # An unusable directory fails here (a store it can write is opened on first write).
            # The backend outlives this cache in its finalizer (the hit counts): it refers back weakly.
            return DiskBackend(directory, self.size_limit, on_reset=_weak_warner(self, "database"))
        except STORE_ERRORS as exc:
            # A directory others control is never read: they could have placed any cubin there.
            # A read-only mount is served as it is; a writable directory whose SQLite files are broken is not
            # (memory, and `cache info --repair` fixes it).
            served = (
                None
                if isinstance(exc, UntrustedStore) or _directory.writable_store(directory)
                else _directory.open_read_only(directory, self.size_limit)
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
            with _directory.warned_dirs_lock:  # one warning per directory and cause in a process
                seen = (os.path.realpath(directory), str(exc)) in _directory.warned_dirs
                _directory.warned_dirs.add((os.path.realpath(directory), str(exc)))
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

    def store(self, key: bytes | str, code: bytes, meta: dict[str, Any] | None = None) -> None:
        """Write ``code`` with its metadata. A failing disk is reported once, never raised."""
        key = _keys.norm_key(key)
        meta = dict(meta or {})
        why = meta.get("memory_only")
        if why and code:  # only its marker (no code, never served) may be stored: `lazykern cache ls` shows it
            log.info("kernel %s is kept in memory only: %s", meta.get("kernel") or meta.get("name") or key[:16], why)
            return
        meta.setdefault("created", time.time())
        meta.setdefault("schema", _keys.SCHEMA_VERSION)
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
        except (*STORE_ERRORS, *FOREIGN) as exc:
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

    def _count(self, name: str, delta: int = 1) -> None:
        with self._count_lock:
            self._counts[name] += delta
            deferred = name in _counters.DEFERRED
            if deferred:  # a hit writes nothing: its counts go with the next write, or at exit
                self._pending[name] = self._pending.get(name, 0) + delta
        _counters.record(name, delta)
        if deferred or name == "lookups":  # not persisted: hits + misses, and a write less on the warm path
            return
        self._reset_warning(_counters.add_count(self._backend, name, delta))

    def _flush_counts(self) -> None:
        """Write the counts a hit only noted (see ``_count``)."""
        for name in _counters.write_counts(self._backend, self._pending, self._count_lock, os.getpid()):
            self._reset_warning(name)

    def _reset_warning(self, name: str | None) -> None:
        if name is not None:
            self._warn_once("counter", f"lazykern cache counter {_counters.STAT + name!r} held garbage; it was reset.")

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
        if not self._backend.delete(_keys.norm_key(key)):
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
            if key.startswith(_counters.STAT_ROOT):
                continue
            try:
                entry = self.read_entry(key, None, schema=False, touch=False)
            except BadEntry as exc:
                if exc.stale:
                    yield {"key": key, "bytes": size, "stored": stored, "last_used": used, "stale": True}
                continue
            except STORE_ERRORS:
                continue
            if entry is None:
                continue
            stale = entry.meta.get("schema") != _keys.SCHEMA_VERSION
            row = {**entry.meta, "key": key, "bytes": len(entry.code), "stored": stored, "last_used": used}
            yield {**row, "stale": stale}

    def _rows(self) -> list[tuple[str, int, float, float]]:
        _later.wait_all()  # what this process compiled is listed once its store is done
        try:
            return list(self._backend.rows())
        except (*STORE_ERRORS, *FOREIGN) as exc:
            self._warn_once("read", f"lazykern could not read its cache at {self.directory!r} ({exc}).")
            return []

    def delete(self, key: str) -> bool:
        return self._backend.delete(_keys.norm_key(key))

    def cull(self, size_limit: int) -> int:
        return self._backend.cull(size_limit)

    def persistent_counters(self) -> dict[str, int]:
        """Counts of every process that used this store (lookups: hits + misses)."""
        self._flush_counts()
        out = {}
        for name in _counters.COUNTERS:
            try:
                value = self._backend.get(_counters.STAT + name, touch=False)
            except (*STORE_ERRORS, *FOREIGN):
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
        except (*STORE_ERRORS, *FOREIGN):
            volume = sum(row[1] for row in rows)
        return {
            "lookups": c["lookups"],
            "hits": c["hits"],
            "misses": c["misses"],
            "compiles": c["compiles"],
            "compile_seconds": c["compile_ms"] / 1000,
            "seconds_saved": c["saved_ms"] / 1000,
            "corrupt": c["corrupt"],
            "entries": sum(1 for row in rows if not row[0].startswith(_counters.STAT_ROOT)),
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


_default: KernelCache | None = None
_default_lock = _fork.lock()


def default_cache() -> KernelCache:
    """The process-wide cache, opened from the environment on first use."""
    global _default
    with _default_lock:
        if _default is None:
            # A mistyped LAZYKERN_* variable is reported at first use, whichever it is; the store's own
            # settings open the cache as they were just read (the environment is read once).
            settings = config.check_settings()
            _default = KernelCache(
                settings.cache_dir,
                size_limit=settings.cache_size,
                enabled=settings.cache_enabled,
                lock_timeout=settings.lock_timeout,
            )
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

"""The kernel store: compiled binaries on disk, keyed by everything that made them.

``KernelCache`` implements cuda.core's ``ProgramCacheResource`` (bytes in,
bytes out), so it can be handed to ``Program.compile(cache=...)``; lazykern
itself uses :meth:`KernelCache.get_or_compile`, which also keeps a metadata
record per entry and makes sure a key is compiled once even when threads and
processes ask for it at the same moment.

Use :meth:`lookup`/``get`` to ask "is it there" and "give it to me" in one
step: there is deliberately no ``__contains__``, whose check-then-read idiom
races with other processes and with eviction.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import filelock

from . import _entry, config
from ._store import STORE_ERRORS, DiskBackend, MemoryBackend
from .errors import CacheError

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

SCHEMA_VERSION = 1
_STAT = "lazykern:stat:"
_COUNTERS = ("hits", "misses", "compiles", "compile_ms", "saved_ms", "corrupt")


class LazykernWarning(UserWarning):
    """Something was degraded or repaired; the program goes on."""


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
    from .compiler import toolchain_fingerprint, user_include_dirs

    record = {
        "schema": SCHEMA_VERSION,
        "source": hashlib.sha256(source.encode()).hexdigest(),
        "arch": arch,
        "options": list(options),
        "target": target,
        "route": route,
        "toolchain": toolchain or toolchain_fingerprint(),
        "headers": _fingerprint_dirs(user_include_dirs(options)),
        "extra": extra,
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _fingerprint_dirs(dirs: Sequence[str]) -> str:
    """Digest of the header files under user include dirs, so editing one misses."""
    h = hashlib.sha256()
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            subdirs.sort()
            for f in sorted(files):
                path = os.path.join(root, f)
                h.update(path.encode())
                try:
                    with open(path, "rb") as fh:
                        h.update(hashlib.sha256(fh.read()).digest())
                except OSError:
                    h.update(b"?")
    return h.hexdigest()


def _norm_key(key: bytes | str) -> str:
    if isinstance(key, bytes):
        return key.hex()
    if isinstance(key, str):
        return key
    raise TypeError(f"cache keys must be bytes or str, got {type(key).__name__}")


class KernelCache(ProgramCacheResource):
    """A diskcache-backed store of compiled kernels, degrading to memory.

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
    ) -> None:
        self.size_limit = config.parse_size(size_limit) if size_limit is not None else config.cache_size_limit()
        enabled = config.disk_cache_enabled() if enabled is None else enabled
        self.requested_directory = os.fspath(directory) if directory is not None else config.default_cache_dir()
        self.degraded: str | None = None
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._count_lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._key_locks_guard = threading.Lock()
        self._warned: set[str] = set()
        if enabled:
            self._backend = self._open_disk(self.requested_directory)
        else:
            self._backend = MemoryBackend(self.size_limit)
            self.degraded = "disabled by LAZYKERN_CACHE"

    # -- opening ---------------------------------------------------------
    def _open_disk(self, directory: str) -> DiskBackend | MemoryBackend:
        try:
            _prepare_dir(directory)
            return DiskBackend(directory, self.size_limit)  # diskcache writes its settings: a read-only dir fails here
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
        warnings.warn(message, LazykernWarning, stacklevel=3)

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
            if isinstance(value, bytes) and len(value) == 64:
                return value.decode()
        except STORE_ERRORS:
            pass
        fingerprint = toolchain_fingerprint()
        try:
            self._backend.set(memo, fingerprint.encode())
        except STORE_ERRORS:
            pass
        return fingerprint

    # -- entries ---------------------------------------------------------
    def lookup(self, key: bytes | str) -> _entry.Entry | None:
        """The entry under ``key``, or None. Corrupt entries are dropped with one warning."""
        key = _norm_key(key)
        try:
            blob = self._backend.get(key)
            if blob is None:
                return None
            return _entry.decode(blob)
        except (*STORE_ERRORS, _entry.EntryError) as exc:
            self._count("corrupt")
            self._warn_once(
                "corrupt:" + key,
                f"lazykern cache entry {key[:16]}... is unreadable ({exc}); it will be recompiled.",
            )
            try:
                self._backend.delete(key)
            except STORE_ERRORS:
                pass
            return None

    def store(self, key: bytes | str, code: bytes, meta: dict[str, Any] | None = None) -> None:
        """Write ``code`` with its metadata. A failing disk is reported once, never raised."""
        key = _norm_key(key)
        meta = dict(meta or {})
        meta.setdefault("created", time.time())
        meta.setdefault("schema", SCHEMA_VERSION)
        blob = _entry.encode(code, meta)
        try:
            self._backend.set(key, blob, tag=meta.get("family"))
        except STORE_ERRORS as exc:
            self._warn_once(
                "write",
                f"lazykern could not write to its cache at {self.directory!r} ({exc}); "
                "newly compiled kernels will not persist.",
            )

    def get_or_compile(
        self,
        key: str,
        compile_fn: Callable[[], tuple[bytes, dict[str, Any]]],
    ) -> tuple[_entry.Entry, bool]:
        """Return ``(entry, compiled_now)``; compile under a per-key lock on a miss.

        Threads wait on an in-process lock; processes sharing the directory
        wait on a file lock, so each key is compiled about once overall.
        """
        entry = self.lookup(key)
        if entry is not None:
            self._hit(entry)
            return entry, False
        with self._thread_lock(key), self._process_lock(key):
            entry = self.lookup(key)
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
            return _entry.Entry(code, {**meta}), True

    def _hit(self, entry: _entry.Entry) -> None:
        self._count("hits")
        self._count("saved_ms", int(entry.compile_seconds * 1000))

    def _thread_lock(self, key: str) -> threading.Lock:
        with self._key_locks_guard:
            return self._key_locks.setdefault(key, threading.Lock())

    def _process_lock(self, key: str):
        if self.directory is None:
            return _NullLock()
        lock_dir = os.path.join(self.directory, "locks")
        try:
            os.makedirs(lock_dir, mode=0o700, exist_ok=True)
            return filelock.FileLock(os.path.join(lock_dir, key[:40] + ".lock"), timeout=600)
        except OSError:
            return _NullLock()

    def _count(self, name: str, delta: int = 1) -> None:
        with self._count_lock:
            self._counts[name] += delta
        try:
            self._backend.incr(_STAT + name, delta)
        except STORE_ERRORS:
            pass

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
        """One dict per stored kernel: key, size, times and its metadata."""
        for key, _size, stored, used in list(self._backend.rows()):
            if key.startswith("lazykern:"):
                continue
            entry = self.lookup(key)
            if entry is None:
                continue
            yield {"key": key, "bytes": len(entry.code), "stored": stored, "last_used": used, **entry.meta}

    def delete(self, key: str) -> bool:
        return self._backend.delete(_norm_key(key))

    def cull(self, size_limit: int) -> int:
        return self._backend.cull(size_limit)

    def persistent_counters(self) -> dict[str, int]:
        out = {}
        for name in _COUNTERS:
            try:
                out[name] = int(self._backend.get(_STAT + name) or 0)
            except (*STORE_ERRORS, TypeError, ValueError):
                out[name] = 0
        return out

    def stats(self) -> dict[str, Any]:
        """This process's hits, misses, compiles and seconds, plus what the store holds."""
        with self._count_lock:
            c = dict(self._counts)
        try:
            volume = self._backend.volume()
            entries = sum(1 for row in self._backend.rows() if not row[0].startswith("lazykern:"))
        except STORE_ERRORS:
            volume, entries = 0, 0
        return {
            "hits": c["hits"],
            "misses": c["misses"],
            "compiles": c["compiles"],
            "compile_seconds": c["compile_ms"] / 1000,
            "seconds_saved": c["saved_ms"] / 1000,
            "corrupt": c["corrupt"],
            "entries": entries,
            "bytes": volume,
            "backend": self.backend,
            "directory": self.directory,
        }

    def __repr__(self) -> str:
        where = self.directory or "memory"
        return f"<KernelCache {where} limit={self.size_limit}>"

    def _repr_html_(self) -> str:
        s = self.stats()
        rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in s.items())
        return f"<b>lazykern KernelCache</b><table>{rows}</table>"


class _NullLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def _prepare_dir(directory: str) -> None:
    """Create the cache dir private to the user; warn when others may write to it."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(f"{directory} exists and is not a directory")
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return
    mode = os.stat(directory).st_mode
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        message = (
            f"lazykern cache directory {directory!r} is writable by other users; "
            "anyone who can write there can change the GPU code you run. Run: chmod go-w on it."
        )
        log.warning(message)
        warnings.warn(message, LazykernWarning, stacklevel=4)


_default: KernelCache | None = None
_default_lock = threading.Lock()


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

"""Compile once: a miss compiles under the key's locks, shared by threads and by processes.

A binary served before its observed compile is done is stored later (``_later``), the key's locks
held until then.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _fork
from . import _entry, _later
from ._locks import NullLock, ProcessLock

log = logging.getLogger("lazykern")


@dataclass(frozen=True)
class Later:
    """What a compile function may give :meth:`KernelCache.get_or_compile` when a binary serves
    before the observed compile is done: ``code`` and ``meta`` serve now; ``finish()`` waits for the
    observation and gives what to store, ``(its binary, its header)`` (``memory_only`` in the
    header when the entry must not be stored): one compile's binary and its record, together."""

    code: bytes
    meta: dict[str, Any]
    finish: Callable[[], tuple[bytes, dict[str, Any]]]


class CompileOnce:
    """:class:`~lazykern.store.cache.KernelCache`'s compile-once path (a mixin)."""

    if TYPE_CHECKING:
        _key_locks: dict[str, threading.Lock]
        _key_locks_guard: threading.Lock
        lock_timeout: float

        @property
        def directory(self) -> str | None: ...

        @property
        def backend(self) -> str: ...

        def lookup(
            self, key: bytes | str, *, expect: dict[str, Any] | None = None, headers: bool = False
        ) -> _entry.Entry | None: ...

        def store(self, key: bytes | str, code: bytes, meta: dict[str, Any] | None = None) -> None: ...

        def _warn_once(self, tag: str, message: str) -> None: ...

        def _count(self, name: str, delta: int = 1) -> None: ...

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
                self._store_compiled(key, code, meta, say=True)
            return _entry.Entry(code, {**meta, "key": key}), True

    def _store_compiled(self, key: str, code: bytes, meta: dict[str, Any], say: bool = False) -> None:
        if meta.get("memory_only"):
            # Not an error: the marker lets `lazykern cache ls` show it; it is never served nor dropped. The
            # compile that decides it says why, once (``say``: an observed compile's answer was said by the
            # compiler already; a later lookup of the marker is a debug line).
            why = (meta.get("name", key[:16]), meta["memory_only"])
            (log.warning if say else log.debug)("%s is kept in memory only, never stored: %s", *why)
            self.store(key, b"", meta)
        else:
            self.store(key, code, meta)

    def _store_later(
        self, key: str, finish: Callable[[], tuple[bytes, dict[str, Any]]], took: float, locks: ExitStack
    ) -> None:
        with locks:
            code, meta = finish()  # waits for the observed compile: other keys' stores go on meanwhile
            with _later.writing():
                if _later.dropped(key):  # given up at exit (said there): the next process compiles it again
                    return
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

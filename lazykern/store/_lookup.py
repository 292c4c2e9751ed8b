"""Finding an entry: read, checked against its key and header, verified against what its compile read.

Nothing the store returns is trusted: every entry carries the sha256 of its binary and the key it was
stored under, both checked on every read; a bad one is dropped (one warning) and recompiled. An entry
that records the headers its compile read is served only while they still read the same. A
memory-only marker is never served, and is no damage: it is left in place with a debug line.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..compile import _manifest
from ..errors import BadEntry, CacheError
from . import _entry, _keys, _later
from ._store import FOREIGN, STORE_ERRORS, StoreBusy, is_busy

if TYPE_CHECKING:
    from ._store import DiskBackend, MemoryBackend
    from ._store_ro import ReadOnlyBackend

log = logging.getLogger("lazykern")


def mismatch(key: str, meta: dict[str, Any], expect: dict[str, Any] | None, schema: bool) -> str | None:
    """Why a decoded header does not belong to this request, or None when it does.

    The schema is part of every key, so a lookup never meets another schema's
    entry unless it was forged; listings skip that test, because entries of
    another lazykern version sharing the directory are valid for that version.
    """
    if meta.get("key") != key:
        return f"header names key {str(meta.get('key'))[:16]}..., not this one (swapped entry)"
    if schema and meta.get("schema") != _keys.SCHEMA_VERSION:
        return f"schema {meta.get('schema')!r}, this lazykern writes {_keys.SCHEMA_VERSION} (stale entry)"
    for field, want in (expect or {}).items():
        if field not in meta:
            return f"header lacks {field!r} (asked for {want!r})"
        if meta[field] != want:
            return f"header has {field}={meta[field]!r}, asked for {want!r}"
    return None


class Lookup:
    """:class:`~lazykern.store.cache.KernelCache`'s reads (a mixin: the cache holds the backend)."""

    if TYPE_CHECKING:
        _backend: DiskBackend | MemoryBackend | ReadOnlyBackend
        _held: dict[str, _entry.Entry]

        @property
        def directory(self) -> str | None: ...

        def _warn_once(self, tag: str, message: str) -> None: ...

        def _warn_busy(self) -> None: ...

        def _count(self, name: str, delta: int = 1) -> None: ...

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
        key = _keys.norm_key(key)
        held = self._held.get(key)  # compiled while another process held the store: served from memory
        if held is not None:
            return held
        _later.wait_for(key)  # compiled here, its store waiting for the header trace: read what it wrote
        try:
            entry = self.read_entry(key, expect)
            if entry is None:
                return None
        except BadEntry as first:
            try:  # another process may have replaced it meanwhile (a delete/store race)
                entry = self.read_entry(key, expect)
                if entry is None:
                    return None
            except BadEntry:
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
            except (_entry.EntryError, *STORE_ERRORS, *FOREIGN):
                pass
        return entry

    def peek(self, key: bytes | str) -> _entry.Entry | None:
        """The sound, current-version entry under ``key``, or None; unlike :meth:`lookup` it changes
        nothing, not even the entry's last-used time, and does not check the headers it records."""
        _later.wait_for(_keys.norm_key(key))
        try:
            return self.read_entry(_keys.norm_key(key), None, touch=False)
        except (BadEntry, *STORE_ERRORS):
            return None

    def read_entry(
        self, key: str, expect: dict[str, Any] | None, *, schema: bool = True, touch: bool = True
    ) -> _entry.Entry | None:
        """The entry under ``key`` (None: no row); BadEntry when it must not be served.

        Only ``touch`` (a lookup that serves) marks the entry used; nothing else changes.
        """
        try:
            blob = self._backend.get(key, touch=touch)
            if blob is None:
                return None
            entry = _entry.decode(blob)
        except _entry.StaleEntry as exc:
            raise BadEntry(str(exc), stale=True) from None
        except StoreBusy:
            raise  # the store is held by another process: nothing is wrong with the entry
        except (CacheError, _entry.EntryError, *FOREIGN) as exc:
            raise BadEntry(str(exc) or type(exc).__name__) from None
        except OSError as exc:  # the blob file exists but cannot be read back
            raise BadEntry(f"blob unreadable: {exc}") from None
        problem = mismatch(key, entry.meta, expect, schema)
        if problem:
            raise BadEntry(problem, stale=problem.endswith("(stale entry)"))
        return entry

    def _drop(self, key: str, reason: str) -> None:
        self._count("corrupt")
        self._warn_once(
            "corrupt:" + key,
            f"lazykern cache entry {key[:16]}... is unreadable ({reason}); it was dropped and will be recompiled.",
        )
        try:
            self._backend.delete(key)
        except (*STORE_ERRORS, *FOREIGN):
            pass

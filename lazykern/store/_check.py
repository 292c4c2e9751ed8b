"""Verifying and repairing a whole store (``lazykern cache info --repair``)."""

from __future__ import annotations

import gc
import logging
import os
import time
from typing import TYPE_CHECKING, Any

import filelock

from ..errors import BadEntry, CacheError
from . import _directory, _keys, _repair
from ._counters import STAT_ROOT
from ._locks import LOCK_DIR
from ._store import STORE_ERRORS

if TYPE_CHECKING:
    from . import _entry
    from ._store import DiskBackend, MemoryBackend
    from ._store_ro import ReadOnlyBackend

log = logging.getLogger("lazykern")


class Checker:
    """:class:`~lazykern.store.cache.KernelCache`'s check and repair (a mixin)."""

    if TYPE_CHECKING:
        _backend: DiskBackend | MemoryBackend | ReadOnlyBackend
        _warned: set[str]
        degraded: str | None
        requested_directory: str

        @property
        def directory(self) -> str | None: ...

        @property
        def backend(self) -> str: ...

        def _rows(self) -> list[tuple[str, int, float, float]]: ...

        def read_entry(
            self, key: str, expect: dict[str, Any] | None, *, schema: bool = True, touch: bool = True
        ) -> _entry.Entry | None: ...

        def _open_disk(self, directory: str) -> DiskBackend | MemoryBackend | ReadOnlyBackend: ...

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
        rows = [row for row in self._rows() if not row[0].startswith(STAT_ROOT)]
        for key, *_ in rows:
            try:
                entry = self.read_entry(key, None, schema=False, touch=False)
                stale += entry is not None and entry.meta.get("schema") != _keys.SCHEMA_VERSION
            except BadEntry as exc:
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
        report["quarantined_files"] = _directory.quarantined_files(self.directory)
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
            _directory.prepare_dir(directory)
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

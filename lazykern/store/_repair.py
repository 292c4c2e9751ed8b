"""Damage to a store directory that keeps diskcache from opening or trusting it, found and fixed.

Two kinds, both invisible to SQLite's ``integrity_check``:

* SQLite's own files (``cache.db``, ``-wal``, ``-shm``, ``-journal``) that are not regular files:
  a directory or a FIFO in their place makes every open fail, a symlink sends writes elsewhere;
  and ``locks`` that is not a directory (every compile then goes without its lock).
  Each is moved aside (renamed ``<name>.corrupt-<time>-<pid>``, never deleted: it may hold
  someone's data); SQLite then starts a fresh file.
* Schema objects diskcache did not create: a foreign table, view or index is dropped; a foreign
  trigger too (one on ``Cache`` can silently delete every entry written). A ``Cache`` or
  ``Settings`` table of another shape cannot be repaired in place: the database is moved aside.

:func:`inspect` changes nothing; :func:`repair` returns what it fixed and, for what it could
not, the exact command that will.
"""

from __future__ import annotations

import functools
import os
import shlex
import sqlite3
import stat
import tempfile
import time

from diskcache.core import DBNAME

from ._locks import LOCK_DIR

SQLITE_FILES = (DBNAME, DBNAME + "-wal", DBNAME + "-shm", DBNAME + "-journal")
_CORE_TABLES = ("Cache", "Settings")


def inspect(directory: str) -> list[str]:
    """One line per problem found (nothing is changed)."""
    found = [f"{name} is {kind}" for name, kind in _odd_files(directory)]
    if not found:
        found += [f"the database holds {what}" for what, _ in _foreign_objects(directory)]
    return found


def repair(directory: str) -> tuple[list[str], list[str]]:
    """Fix what :func:`inspect` finds: ``(fixed, not fixed: each with the command that will)``."""
    fixed: list[str] = []
    unfixed: list[str] = []
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    for name, kind in _odd_files(directory):
        path = os.path.join(directory, name)
        try:
            os.replace(path, f"{path}.corrupt-{stamp}")
            fixed.append(f"{name} was {kind}: moved aside to {name}.corrupt-{stamp}")
        except OSError as exc:
            unfixed.append(
                f"{name} is {kind} and could not be moved aside ({exc.strerror}); "
                f"run: mv {shlex.quote(path)} {shlex.quote(path + '.broken')}"
            )
    if unfixed:
        return fixed, unfixed
    foreign = _foreign_objects(directory)
    db = os.path.join(directory, DBNAME)
    if any(drop is None for _, drop in foreign):  # a core table of another shape: start afresh
        moved = []
        for name in SQLITE_FILES:
            try:
                os.replace(os.path.join(directory, name), os.path.join(directory, f"{name}.corrupt-{stamp}"))
                moved.append(name)
            except FileNotFoundError:
                continue
            except OSError as exc:
                unfixed.append(
                    f"the database holds tables diskcache did not create and could not be moved aside "
                    f"({exc.strerror}); run: mv {shlex.quote(db)} {shlex.quote(db + '.broken')}"
                )
                return fixed, unfixed
        fixed.append(f"the database's tables were not diskcache's: moved it aside to {DBNAME}.corrupt-{stamp}")
        return fixed, unfixed
    drops = [(what, drop) for what, drop in foreign if drop is not None]  # all of them: none is None here
    if drops:
        try:
            con = sqlite3.connect(db, timeout=10, isolation_level=None)
            try:
                for what, drop in drops:
                    con.execute(drop)
                    fixed.append(f"dropped {what}")
            finally:
                con.close()
        except sqlite3.Error as exc:
            unfixed.append(
                f"could not drop what diskcache did not create ({exc}); "
                f"run: mv {shlex.quote(db)} {shlex.quote(db + '.broken')}  (lazykern starts a fresh database)"
            )
    return fixed, unfixed


def _odd_files(directory: str) -> list[tuple[str, str]]:
    """SQLite's files that are not regular files, and a lock directory that is not a directory."""
    out = []
    for name in (*SQLITE_FILES, LOCK_DIR):
        try:
            mode = os.lstat(os.path.join(directory, name)).st_mode
        except OSError:
            continue
        if not (stat.S_ISDIR(mode) if name == LOCK_DIR else stat.S_ISREG(mode)):
            out.append((name, _kind(mode)))
    return out


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "a device or special file"


def _foreign_objects(directory: str) -> list[tuple[str, str | None]]:
    """(what, the statement dropping it, or None for a core table of another shape)."""
    db = os.path.join(directory, DBNAME)
    if not os.path.isfile(db) or os.path.islink(db):
        return []
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            rows = con.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return []  # not a database at all: the integrity check moves it aside
    try:
        expected = _expected_schema()
    except (OSError, sqlite3.Error):  # no temporary directory to build the reference in: nothing to compare
        return []
    out: list[tuple[str, str | None]] = []
    for kind, name, sql in rows:
        if not isinstance(name, str) or name.startswith("sqlite_") or expected.get((kind, name)) == sql:
            continue
        what = f"{kind} {name!r}" + (" (not diskcache's)" if (kind, name) in expected else "")
        if kind == "table" and name in _CORE_TABLES:
            out.append((what, None))
        elif kind in ("table", "view", "index", "trigger"):
            out.append((what, f'DROP {kind.upper()} IF EXISTS "{name.replace(chr(34), chr(34) * 2)}"'))
    return out


@functools.cache
def _expected_schema() -> dict[tuple[str, str], str]:
    """The schema diskcache creates, read from a fresh store (so a diskcache upgrade is followed)."""
    import diskcache

    from ._store import NoPickleDisk, store_settings

    with tempfile.TemporaryDirectory(prefix="lazykern-schema-") as d:
        diskcache.Cache(d, disk=NoPickleDisk, **store_settings(1 << 30)).close()
        con = sqlite3.connect(os.path.join(d, DBNAME))
        try:
            return {(k, n): s for k, n, s in con.execute("SELECT type, name, sql FROM sqlite_master")}
        finally:
            con.close()

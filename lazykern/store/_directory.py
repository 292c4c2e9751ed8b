"""Whether a store directory may be used: created private to the user, refused when others control it."""

from __future__ import annotations

import os
import shlex
import stat
from typing import TYPE_CHECKING

from .. import _fork, config
from ..errors import UntrustedStore
from ._store import STORE_ERRORS

if TYPE_CHECKING:
    from ._store_ro import ReadOnlyBackend

warned_dirs: set[tuple[str, str]] = set()
warned_dirs_lock = _fork.lock()


def writable_store(directory: str) -> bool:
    db = os.path.join(directory, "cache.db")
    return os.access(directory, os.W_OK) and (not os.path.isfile(db) or os.access(db, os.W_OK))


def prepare_dir(directory: str) -> None:
    """Create the cache dir private to the user; refuse one that others control (CacheError says why).

    Like ssh and pip: a directory another user (not root) owns, or that others may write
    to without the sticky bit, lets them replace any kernel this process will run.
    ``LAZYKERN_SHARED_CACHE=1`` accepts it (a team cache shared on purpose).
    """
    try:  # one stat answers "exists", "is a directory" and "whose" (each process opens its store once)
        st = os.stat(directory)
    except (OSError, ValueError):  # as os.path.isdir: not there (or not reachable): making it says why
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"{directory} exists and is not a directory")
    if config.shared_cache_allowed():
        return
    if st.st_uid not in (os.geteuid(), 0):  # as ssh: yours, or root's (who can change your code anyway)
        raise UntrustedStore(
            f"it is owned by uid {st.st_uid}, not by you (uid {os.geteuid()}): that user could replace "
            "the GPU code you run. Use a directory of your own, or set LAZYKERN_SHARED_CACHE=1 to share it on purpose"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise UntrustedStore(
            "other users can write to it: they could replace the GPU code you run. "
            f"Run: chmod go-w {shlex.quote(os.path.realpath(directory))}  "
            "(or set LAZYKERN_SHARED_CACHE=1 to share it on purpose)"
        )
    try:  # the database left by a time the directory was shared (stat follows links, as SQLite's open does)
        db = os.stat(os.path.join(directory, "cache.db"))
    except OSError:
        return
    if db.st_uid not in (os.geteuid(), 0) or db.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        db_path = os.path.join(os.path.realpath(directory), "cache.db")
        raise UntrustedStore(
            f"its cache.db is owned by uid {db.st_uid} or writable by others: they could replace the GPU code "
            f"you run. Run: mv {shlex.quote(db_path)} {shlex.quote(db_path + '.untrusted')}  (lazykern starts "
            "a fresh one), or set LAZYKERN_SHARED_CACHE=1"
        )


def open_read_only(directory: str, size_limit: int) -> ReadOnlyBackend | None:
    """A read-only backend on the store in ``directory``, or None when none can be read."""
    from ._store_ro import ReadOnlyBackend  # import on first use: only a store that cannot be written needs it

    try:
        return ReadOnlyBackend(directory, size_limit)
    except STORE_ERRORS:
        return None


def quarantined_files(directory: str | None) -> list[str]:
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

"""The toolchain fingerprint of a store, remembered by the stat of the files it stands for.

Computing :func:`lazykern.compiler.toolchain_fingerprint` loads NVRTC, and even the list
of files that identify the toolchain costs a search through ``cuda.pathfinder``: together
milliseconds that every fresh process would pay before its first cached kernel. A small
JSON file in the store (``toolchain-<environment>.json``) records the fingerprint with the
stat of each of those files (NVRTC's libraries, their directory, ``nvrtc.h``, CCCL's
``version.h``) and the toolkit's header directories (``compiler.system_include_dirs``, part of
every key: found by a search through ``cuda.pathfinder``, a quarter millisecond); a later
process stats them, and only a difference recomputes both.

The file is chosen by the environment (Python prefix and path, numba-cuda's version, the
variables that steer the library search: ``compiler.TOOLCHAIN_ENV``), so two virtual
environments sharing a store never take each other's fingerprint. As in ccache's manifests, a file is trusted only when
device, inode, size, mtime and ctime all match, and a memo is not written when one of the
files changed while it was computed. Written to a temporary name, then renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..compile import compiler

log = logging.getLogger("lazykern")

FORMAT = 2  # 2: the toolkit's header directories are recorded too
_OLDER = (1,)  # formats earlier lazykern versions wrote: replaced quietly
_MAX_BYTES = 1 << 16
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FIVE_INTS = [int] * 5  # a file's recorded stat: device, inode, size, mtime and ctime, each an exact int
_known: dict[tuple[str | None, str], str] = {}  # (store directory, environment) -> fingerprint
_lock = threading.Lock()


def environment() -> str:
    """Digest of what decides which toolchain this process finds (cheap: no file is read).

    ``sys.path[0]`` (the script's directory, or the working directory) is left out: it changes
    with every script, and a toolchain is not installed there.
    """
    path = os.pathsep.join(sys.path[1:])
    parts = [f"python {sys.prefix}", f"path {path}", f"numba-cuda {compiler.numba_cuda_version()}"]
    for var in compiler.TOOLCHAIN_ENV:  # a loop, not a comprehension: every fresh process runs this once, cold
        parts.append(f"{var}={os.environ.get(var, '')}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def fingerprint(directory: str | None, on_garbage: Callable[[str], None] | None = None) -> str:
    """The toolchain fingerprint, from this process's memo, the store's memo file, or computed.

    ``directory``: the store (None: memory only, nothing persisted). ``on_garbage(message)``
    hears about a memo file that is not one this module writes (it is then replaced).
    """
    env = environment()
    found = _known.get((directory, env))
    if found is not None:
        return found
    with _lock:
        found = _known.get((directory, env))
        if found is None:
            path = None if directory is None else os.path.join(directory, f"toolchain-{env[:32]}.json")
            found = _read(path, env, on_garbage) if path else None
            if found is None:
                found = _compute(path, env)
            _known[(directory, env)] = found
    return found


def forget() -> None:
    """Drop this process's memo and header directories (tests that change the toolchain under a
    running process, or act as a fresh one)."""
    with _lock:
        _known.clear()
        compiler.forget_system_include_dirs()


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _read(path: str, env: str, on_garbage: Callable[[str], None] | None) -> str | None:
    """The fingerprint the memo file records, if every file it names still has its recorded stat."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None  # no memo yet (or not a file we may read): computed and written below
    try:
        raw = _read_bounded(fd)
        if len(raw) > _MAX_BYTES:
            raise ValueError(f"larger than {_MAX_BYTES} bytes")
        data = json.loads(raw)
        if isinstance(data, dict) and data.get("environment") == env and data.get("format") in _OLDER:
            log.debug("toolchain memo %s has format %s, not %s; recomputing", path, data["format"], FORMAT)
            return None  # written by another lazykern version: replaced, nothing is wrong with it
        files, value, include_dirs = _parse(data, env)
    except (OSError, ValueError, TypeError, KeyError, RecursionError) as exc:
        if on_garbage is not None:
            on_garbage(f"lazykern toolchain memo {path!r} is unreadable ({exc}); recomputed the toolchain fingerprint.")
        return None
    for name, recorded in files:
        if _stat(name) != recorded:
            log.debug("toolchain memo %s: %s changed; recomputing", path, name)
            return None
    compiler.remember_system_include_dirs(include_dirs)
    return value


def _read_bounded(fd: int) -> bytes:
    """At most ``_MAX_BYTES + 1`` bytes of ``fd``, then closes it (plain reads: no file object, whose
    set-up costs three more system calls on every fresh process's first kernel)."""
    try:
        chunks, size = [], 0
        while size <= _MAX_BYTES:
            chunk = os.read(fd, _MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _parse(data: Any, env: str) -> tuple[list[tuple[str, list[int] | None]], str, tuple[str, ...]]:
    """(files with their stat, fingerprint, header directories) of a memo, or ValueError saying what
    is wrong with it."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("environment") != env:
        raise ValueError("not a memo of this format and environment")
    value = data["fingerprint"]
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ValueError("fingerprint is not a sha256")
    files = []
    names = set()
    for item in data["files"]:
        name, recorded = item
        ok = recorded is None or (isinstance(recorded, list) and list(map(type, recorded)) == _FIVE_INTS)
        if not isinstance(name, str) or not ok:
            raise ValueError(f"bad file record {item!r:.80}")
        files.append((name, recorded))
        names.add(name)
    include_dirs = data["include_dirs"]
    if not isinstance(include_dirs, list) or not all(map(str.__instancecheck__, include_dirs)):
        raise ValueError("include_dirs is not a list of paths")
    if not names.issuperset(include_dirs):
        raise ValueError("a header directory without its stat")
    return files, value, tuple(include_dirs)


def _compute(path: str | None, env: str) -> str:
    start_ns = time.time_ns()
    include_dirs = list(compiler.system_include_dirs())
    # The directories are stat'ed like the files: one replaced or moved sends a process to search again.
    names = [str(f) for f in compiler.toolchain_files()] + include_dirs
    value = compiler.toolchain_fingerprint()
    if path is None:
        return value
    files = [(name, _stat(name)) for name in names]
    # A file that changed while the fingerprint was computed may not be the one it describes.
    if any(st is not None and max(st[3], st[4]) >= start_ns for _, st in files):
        log.debug("toolchain files changed during the fingerprint; not memoized")
        return value
    record = {"format": FORMAT, "environment": env, "fingerprint": value, "include_dirs": include_dirs, "files": files}
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(record, fh)
        os.replace(tmp, path)  # a reader sees the old memo or the new one, never half of one
    except OSError as exc:  # a read-only store: the fingerprint is recomputed by each process
        log.debug("could not write the toolchain memo %s: %s", path, exc)
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return value

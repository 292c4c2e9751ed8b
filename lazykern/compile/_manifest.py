"""The headers a compile read, as NVRTC reported them, and whether they still hold (ccache's direct mode).

NVRTC cannot list its dependencies (no ``-M``), but ``--fdevice-time-trace``
writes one "Processing Header File" event per header its front end read, with
the path as it resolved it (``sub/../h1.h``, an ``-I`` directory joined with the
name, a toolkit header by full path). The store's key covers source, options, arch
and toolchain, and each entry carries a *manifest* of what the compile read, from two
records that each cover what the other cannot:

* NVRTC's trace (of a pass in a child process, ``_tracer``, over the source with its own
  ``#line`` directives blanked): every header opened, toolkit headers and what they include too.
  A ``#line`` or line marker *in a header* renames events: the header may be missing, a name
  may be no file or a file never opened, nesting says nothing about who included whom.
* the include graph (``_include_graph``, over the preprocessor's tokens): every header the
  source can reach through non-toolkit headers, whatever ``#if`` says, each found by NVRTC's
  search, the ``__has_include`` probes, and the ``#line`` names. Where it cannot know
  (an operand a macro spells), the compile stays in memory.

A trace event that names no header of the graph is a header reached through the toolkit (or a
``#line`` name that is also a file): recorded, its search places taken from the trace's nesting
plus the directories of headers that hold line directives, or from every directory of the compile
where a candidate includer's name is a ``#line`` name. A name that is no file must be a ``#line`` name.

* ``files``: ``[path as NVRTC opened it, sha256, st_dev, st_ino, size, mtime_ns, ctime_ns]``.
  A relative path (found through the working directory or a relative ``-I``)
  stays relative: a lookup elsewhere checks the file a compile there would read.
  Paths are never normalised (``a/link/../h`` is not ``a/h`` when ``link`` is a symlink).
* ``absent`` (and ``absent_dirs``, the same grouped by directory: one stat of an unchanged
  directory vouches for every name missing in it): the places searched before each header
  was found that held no regular file; if one appears, a compile now would read it instead. The places
  each ``__has_include`` probe looked at count too, and ``present`` holds the place where
  such a probe found a file: it must stay.

:func:`verify` serves an entry only if every header still has its digest and
every ``absent`` place is still empty. The stat decides first: a header whose
device, inode, size, mtime *and* ctime all equal the recorded ones is not read
(nobody can set a ctime; ``cp -p`` and ``tar`` can set an mtime). Otherwise it is
hashed once per process (a memo keyed by path, valid while the stat is the same), and
a header touched with its bytes unchanged comes back with its new stat, which the store
writes into the entry so later processes need not read it either.

:func:`record` refuses to persist a compile whose header changed while NVRTC
read it (mtime or ctime at or after the compile's start), is not a regular file,
or vanished, or that reads the clock (``__TIME__``, ``__DATE__``, ``__TIMESTAMP__``
as tokens in the source or a header, as ccache does): such a binary is served from memory only.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from . import _include_graph

_EVENT = "Processing Header File"
# Headers compiled into NVRTC itself: the NVRTC version in the toolchain fingerprint pins them.
_BUILTIN = "__nv_nvrtc_builtin"
MAX_HEADER_BYTES = 64 << 20
_CHUNK = 1 << 20
_Stat = tuple[int, int, int, int, int]
# path -> (stat it had when hashed, sha256): a header is read at most once per process per change.
_digests: dict[str, tuple[_Stat, str]] = {}


class _Unpersistable(Exception):
    """The compile is sound but its manifest cannot be trusted later: serve it, do not store it."""


def start_ns() -> int:
    """The compile's start on the clock file timestamps come from (the kernel's coarse clock).

    ``time.time_ns()`` can run ahead of the coarse clock by a tick, so a header
    written just after the start could carry an earlier timestamp; one tick earlier is safe.
    """
    # Linux's CLOCK_REALTIME_COARSE is 5; Python names it only on some builds.
    coarse = getattr(time, "CLOCK_REALTIME_COARSE", 5 if sys.platform.startswith("linux") else None)
    if coarse is None:  # file systems elsewhere stamp with their own granularity: keep a margin
        return time.time_ns() - 20_000_000
    tick = int(max(time.clock_getres(coarse), 1e-3) * 1e9)
    return time.clock_gettime_ns(coarse) - tick


def trace_events(trace_file: str) -> list[tuple[int, int, str]]:
    """``(ts, dur, path)`` of each header event in an NVRTC time-trace file."""
    with open(trace_file, "rb") as fh:
        data = json.load(fh)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    out = []
    for e in events:
        if isinstance(e, dict) and e.get("name") == _EVENT:
            path = (e.get("args") or {}).get("detail")
            if isinstance(path, str):
                out.append((int(e.get("ts", 0)), int(e.get("dur", 0)), path))
    return out


def record(
    events: Iterable[tuple[int, int, str]],
    *,
    source: str,
    main_dir: str,
    search_dirs: Sequence[str],
    started: int,
    pinned_dirs: Sequence[str] = (),
    defines: Sequence[str] = (),
) -> tuple[dict[str, Any] | None, str]:
    """``(manifest, "")`` of one compile, or ``(None, why its binary must not be stored)``.

    ``events``: NVRTC's header events of a traced pass over ``source`` with its own line
    directives neutralised (:func:`lazykern.compile._pp.without_line_directives`).
    ``source``: the translation unit (followed by :mod:`._include_graph` for what the trace does not say).
    ``main_dir``: where the source's own quoted includes are searched (the
    directory of the program name, usually ``""``: the working directory).
    ``search_dirs``: the ``-I`` directories then the toolkit's (``pinned_dirs``), in NVRTC's order.
    ``defines``: the ``-D`` values. ``started``: :func:`start_ns` taken before the compile.
    """
    try:
        return _record(events, source, main_dir, search_dirs, started, pinned_dirs, defines), ""
    except _Unpersistable as exc:
        return None, str(exc)


def _record(
    events: Iterable[tuple[int, int, str]],
    source: str,
    main_dir: str,
    search_dirs: Sequence[str],
    started: int,
    pinned_dirs: Sequence[str],
    defines: Sequence[str],
) -> dict[str, Any]:
    files: dict[str, list[Any]] = {}

    def read(path: str) -> bytes:
        try:
            files[path], data = _snapshot(path, started)
        except FileNotFoundError:
            raise _Unpersistable(f"header {path} vanished after the compile") from None
        return data

    follower = _include_graph.Follower(search_dirs, pinned_dirs, defines, lambda p: _is_file(p, started), read)
    follower.start(source, main_dir)
    # A #line or line marker in a header renames its trace events: a name may be no file, or a file
    # never opened, and what nests under it may have been included by any header.
    nested = [(p, inc) for p, inc in _with_includers(events) if not (p.startswith(_BUILTIN) and os.sep not in p)]
    extra: list[tuple[str, set[str | None]]] = []
    missing = []
    for path, includers in nested:
        if path in files or path in follower.seen:
            continue
        if not _is_file(path, started):
            missing.append(path)
            continue
        follower.add(path)  # reached through a toolkit header, or a #line name that is also a file
        extra.append((path, includers))
    graph = follower.finish()
    for path in missing:  # no file: a #line name of a header the graph holds, or a header gone
        if path not in graph.line_names and not graph.line_unknown:
            raise _Unpersistable(f"header {path} vanished after the compile")
    if graph.unknown:
        raise _Unpersistable(f"{graph.unknown}: the headers it reads cannot be known")
    if graph.clock:
        raise _Unpersistable(f"{graph.clock}: its binary depends on when it was compiled")
    searched = set(graph.absent)
    every_dir = {main_dir, *(os.path.dirname(p) for p in files)}
    renaming_dirs = {os.path.dirname(p) for p in graph.renaming}
    for path, includers in extra:
        # Nesting is trusted where no candidate includer's name may be a #line name; the headers
        # whose events were renamed may have included it all the same.
        if graph.line_unknown or any(i in graph.line_names for i in includers if i is not None):
            dirs = every_dir
        else:
            dirs = {main_dir if i is None else os.path.dirname(i) for i in includers} | renaming_dirs
        searched.update(_searched_before(path, sorted(dirs), search_dirs))
    present = set(graph.present)
    empty = [place for place in sorted(searched - set(files) - present) if not _is_file(place, started)]
    absent, absent_dirs = _by_directory(empty, started)
    return {
        "files": list(files.values()),
        "absent": absent,
        "absent_dirs": absent_dirs,
        "present": sorted(present - set(files)),
    }


def _by_directory(places: list[str], started: int) -> tuple[list[str], list[list[Any]]]:
    """Empty places, most of them grouped by directory: ``(alone, [[dir, its stat or None, names]])``.

    A directory whose stat (inode, mtime, ctime) is unchanged has had no entry added, removed
    or renamed, so every name that was missing there still is: one stat instead of one per
    place (a CUB include searches ~1,300 places). A directory that does not exist stays
    empty until it appears, which changes its stat. Places that exist as something (a
    dangling link, a directory) are checked alone: their target can appear without the
    directory changing; so are those in a directory changed since the compile started.
    """
    alone: list[str] = []
    groups: dict[str, list[str]] = {}
    for place in places:
        try:
            os.lstat(place)
            alone.append(place)
        except FileNotFoundError:
            groups.setdefault(os.path.dirname(place), []).append(os.path.basename(place))
        except (OSError, ValueError):
            alone.append(place)
    dirs = []
    for directory, names in sorted(groups.items()):
        st = _stat(directory or ".")
        if st is not None and (not stat.S_ISDIR(st.st_mode) or max(st.st_mtime_ns, st.st_ctime_ns) >= started):
            alone += [os.path.join(directory, n) for n in names]
            continue
        dirs.append([directory, None if st is None else list(_dir_key(st)), sorted(names)])
    return sorted(alone), dirs


def _dir_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _is_file(place: str, started: int) -> bool:
    st = _stat(place)
    if st is None or not stat.S_ISREG(st.st_mode):
        return False
    if max(st.st_mtime_ns, st.st_ctime_ns) >= started:
        raise _Unpersistable(f"{place} changed while it was compiled (or appeared while the compile searched for it)")
    return True


def verify(manifest: Any) -> tuple[str | None, dict[str, Any] | None]:
    """``(None, refreshed)`` when every header still reads as recorded and no searched place gained
    a header, else ``(why not, None)``.

    ``refreshed`` is the manifest with the new stats of headers that were touched but hold the
    same bytes (worth storing, so later processes need not read them again), or None.
    Raises ValueError for a manifest that is not one :func:`record` writes (a forged entry).
    """
    checked = start_ns()
    if not isinstance(manifest, dict):
        raise ValueError("header manifest is not an object")
    files, absent = manifest.get("files"), manifest.get("absent")
    if not isinstance(files, list) or not isinstance(absent, list):
        raise ValueError("header manifest lacks its file lists")
    touched: dict[int, list[Any]] = {}
    for i, item in enumerate(files):
        if not (isinstance(item, list) and len(item) == 7 and isinstance(item[0], str) and isinstance(item[1], str)):
            raise ValueError("header manifest holds a malformed file record")
        path, digest, *recorded = item
        st = _stat(path)
        if st is None:
            return f"header {path} is gone", None
        if not stat.S_ISREG(st.st_mode):
            return f"header {path} is no longer a regular file", None
        now = _key(st)
        if list(now) == recorded:
            continue
        if _digest(path, now) != digest:
            return f"header {path} changed", None
        if max(now[3], now[4]) < checked:  # not changing right now: its new stat can be trusted later
            touched[i] = [path, digest, *now]
    places = list(absent)
    for group in manifest.get("absent_dirs", []):
        if not (isinstance(group, list) and len(group) == 3 and isinstance(group[0], str)):
            raise ValueError("header manifest holds a malformed directory record")
        directory, recorded_dir, names = group
        st = _stat(directory or ".")
        now_dir = None if st is None else list(_dir_key(st))
        if now_dir != recorded_dir or (st is not None and not stat.S_ISDIR(st.st_mode)):
            if not isinstance(names, list):
                raise ValueError("header manifest holds a malformed directory record")
            places += [os.path.join(directory, n) for n in names if isinstance(n, str)]
    for place in places:
        if not isinstance(place, str):
            raise ValueError("header manifest holds a malformed search place")
        st = _stat(place)
        if st is not None and stat.S_ISREG(st.st_mode):
            return f"{place} now exists: a compile now would find it", None
    present = manifest.get("present", [])
    if not isinstance(present, list):
        raise ValueError("header manifest holds a malformed probe list")
    for place in present:
        st = _stat(place) if isinstance(place, str) else None
        if st is None or not stat.S_ISREG(st.st_mode):
            return f"{place} is gone: a compile now would not find it", None
    if not touched:
        return None, None
    return None, {**manifest, "files": [touched.get(i, item) for i, item in enumerate(files)]}


def _digest(path: str, now: _Stat) -> str | None:
    """sha256 of ``path`` (whose stat is ``now``), memoized while its stat stays the same."""
    memo = _digests.get(path)
    if memo is not None and memo[0] == now:
        return memo[1]
    try:
        st, digest, _ = _read(path)
    except (OSError, _Unpersistable):
        return None
    if st == now:
        _digests[path] = (st, digest)
    return digest


def _snapshot(path: str, started: int) -> tuple[list[Any], bytes]:
    try:
        st, digest, data = _read(path)
    except FileNotFoundError:
        raise  # a #line name, or a header gone: the caller tells which
    except OSError as exc:
        raise _Unpersistable(f"header {path} cannot be read back ({exc.strerror})") from None
    if max(st[3], st[4]) >= started:
        raise _Unpersistable(f"header {path} changed while it was compiled")
    _digests[path] = (st, digest)
    return [path, digest, *st], data


def _read(path: str) -> tuple[_Stat, str, bytes]:
    """(stat, sha256, bytes) of a regular file, read non-blocking and bounded; the stat must not move meanwhile."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise _Unpersistable(f"header {path} is not a regular file")
        if before.st_size > MAX_HEADER_BYTES:
            raise _Unpersistable(f"header {path} is larger than {MAX_HEADER_BYTES} bytes")
        data = bytearray()
        while chunk := os.read(fd, _CHUNK):
            data += chunk
            if len(data) > MAX_HEADER_BYTES:  # /proc files claim size 0
                raise _Unpersistable(f"header {path} is larger than {MAX_HEADER_BYTES} bytes")
        after = _key(os.fstat(fd))
    finally:
        os.close(fd)
    if _key(before) != after:
        raise _Unpersistable(f"header {path} changed while it was read")
    return after, hashlib.sha256(data).hexdigest(), bytes(data)


def _key(st: os.stat_result) -> _Stat:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _with_includers(events: Iterable[tuple[int, int, str]]) -> list[tuple[str, set[str | None]]]:
    """Each header with the headers that may have included it (None: the source itself).

    Events nest by time; ``ts`` and ``dur`` are whole microseconds, so an end can
    be off by one. Where nesting is ambiguous, every possible includer is kept:
    an extra one only adds places to check, never misses one.
    """
    stack: list[tuple[int, str]] = []  # (end, path)
    out = []
    for ts, dur, path in sorted(events, key=lambda e: (e[0], -e[1])):
        while stack and stack[-1][0] + 1 < ts:
            stack.pop()
        includers: set[str | None] = set()
        for end, parent in reversed(stack):
            includers.add(parent)
            if ts < end:
                break
        else:
            includers.add(None)
        out.append((path, includers))
        stack.append((ts + dur, path))
    return out


def _searched_before(path: str, includer_dirs: Sequence[str], search_dirs: Sequence[str]) -> set[str]:
    """Where NVRTC looked for ``path``'s name before finding it there (every reading of how it was found)."""
    places: set[str] = set()
    for i, directory in enumerate(search_dirs):
        name = _name_under(path, directory)
        if name is not None:
            # A quoted include searches the includer's directory first, then each -I directory in order.
            places.update(os.path.join(d, name) for d in (*includer_dirs, *search_dirs[:i]))
    places.discard(path)
    return places


def _name_under(path: str, directory: str) -> str | None:
    if directory == "":
        return None if os.path.isabs(path) else path
    prefix = directory.rstrip(os.sep) + os.sep
    if not path.startswith(prefix):
        return None
    return path[len(prefix) :].lstrip(os.sep) or None

"""The headers a compile read, as NVRTC reported them, and whether they still hold (ccache's direct mode).

NVRTC cannot list its dependencies (no ``-M``), but ``--fdevice-time-trace``
writes one "Processing Header File" event per header its front end read, with
the path as it resolved it (``sub/../h1.h``, an ``-I`` directory joined with the
name, a toolkit header by full path). The store's key covers source, options, arch
and toolchain, and each entry carries a *manifest* of what the compile read. An entry is one
observation: the manifest and the binary come from the same compile of the user's exact bytes (the
observed compile, in a child process, ``_tracer``), and models may only add to what it reports:

* NVRTC's trace of that compile: every header opened, toolkit headers and what they include too.
  A ``#line`` or line marker renames events: a name may be no file (recorded as a place that must
  stay empty), a file never opened (recorded all the same), nesting says nothing about who
  included whom (then every directory of the compile counts).
* the include graph (``_include_graph``, over the preprocessor's tokens): every header the
  source can reach through non-toolkit headers, whatever ``#if`` says, each found by NVRTC's
  search, the ``__has_include`` probes, and the ``#line`` names. Where it cannot know
  (an operand a macro spells), the compile stays in memory.
* the candidate scan (``_scan``) of every file read, toolkit headers too: every include and probe
  operand, in strings and comments too; each place searched before where the name is found (all of
  them where it is not) must stay empty, a probe's find must stay.

Nothing is recorded unless it still reads as the compile read it (ccache's rule): every header, and
every directory or link on its path (``lstat`` each; a rename or a retargeted link gives the moved
inode or the new link a new ctime), must be older than the compile's start; directories above the
search path must be the very ones they were at the start (:func:`anchors`: their timestamps change
with anyone's files); a header is re-stat'ed after it is hashed.

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

:func:`record` refuses to persist a compile whose header (or a directory on its path) changed
while NVRTC read it (mtime or ctime at or after the compile's start), is mapped for writing by a
process (a write through a shared mapping to a page already dirty changes it without a new mtime:
looked for only while the header's last stamp is within the writeback window), is not a regular file,
or vanished, or that reads the clock (``__TIME__``, ``__DATE__``, ``__TIMESTAMP__``
as tokens in the source or a header, as ccache does): such a binary is served from memory only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from . import _include_graph, _scan

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
    return _clock_ns() - _tick_ns()


# Linux's CLOCK_REALTIME_COARSE is 5; Python names it only on some builds.
_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5 if sys.platform.startswith("linux") else None)


def _clock_ns() -> int:
    """The clock file timestamps come from, now (:func:`start_ns` without its tick)."""
    return time.time_ns() if _COARSE is None else time.clock_gettime_ns(_COARSE)


@functools.cache
def _tick_ns() -> int:
    """How far that clock may lag: one tick (file systems elsewhere stamp with their own
    granularity: a margin of 20 ms)."""
    if _COARSE is None:
        return 20_000_000
    return int(max(time.clock_getres(_COARSE), 1e-3) * 1e9)


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
    cwd: str | None = None,
    follow_pinned: bool = False,
    anchors: dict[str, tuple[int, int]] | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """``(manifest, "")`` of one compile, or ``(None, why its binary must not be stored)``.

    ``events``: NVRTC's header events of the observed compile of ``source`` (the user's exact bytes).
    ``source``: the translation unit (scanned for what the trace does not say).
    ``main_dir``: where the source's own quoted includes are searched (the
    directory of the program name, usually ``""``: the working directory).
    ``search_dirs``: the ``-I`` directories then the toolkit's (``pinned_dirs``), in NVRTC's order.
    ``defines``: the ``-D`` values. ``started``: :func:`start_ns` taken before the compile.
    ``cwd``: the working directory the compile ran in (relative names are read there, whatever
    the process's directory is now; they stay relative in the manifest). ``follow_pinned``: with no
    trace (a ``.cu`` that numba-cuda compiles), follow the toolkit headers too, to scan them.
    ``anchors``: :func:`anchors` taken at the start, or None (every directory is held to the rule).
    """
    try:
        observer = _Observer(started, os.getcwd() if cwd is None else cwd, anchors or {})
        manifest = observer.record(
            events, source, main_dir, search_dirs, pinned_dirs, defines, follow_pinned=follow_pinned
        )
        return manifest, ""
    except _Unpersistable as exc:
        return None, str(exc)


class _Observer:
    """What one compile read, checked by ccache's rule: nothing on a path (a header, a directory or
    link it crosses) changed at or after the compile's start, so what is read now is what NVRTC read."""

    def __init__(self, started: int, cwd: str, anchors: dict[str, tuple[int, int]]) -> None:
        self.started, self.cwd, self.anchors = started, cwd, anchors
        self.files: dict[str, list[Any]] = {}
        self.datas: dict[str, bytes] = {}
        self._lstats: dict[str, os.stat_result | None] = {}
        self._is_file: dict[str, bool] = {}
        self._walked: dict[str, str | None] = {}
        here = _stat(cwd)
        if here is None or not stat.S_ISDIR(here.st_mode):
            raise _Unpersistable(f"the working directory {cwd} of the compile is gone")
        self._walk(cwd)

    def at(self, path: str) -> str:
        """Where ``path`` (as NVRTC spelled it) is, from the compile's working directory."""
        return os.path.join(self.cwd, path)

    def read(self, path: str) -> bytes:
        if path in self.datas:
            return self.datas[path]
        try:
            self.files[path], data = _snapshot(path, self.at(path), self.started)
        except FileNotFoundError:
            raise _Unpersistable(f"header {path} vanished after the compile") from None
        self._walk(self.at(path))
        self.datas[path] = data
        return data

    def is_file(self, place: str) -> bool:
        known = self._is_file.get(place)
        if known is None:
            at = self.at(place)
            resolved = self._walk(at)
            known = self._is_file[place] = resolved is not None and _is_file(at, self.started)
        return known

    def _lstat(self, path: str) -> os.stat_result | None:
        if path not in self._lstats:
            try:
                self._lstats[path] = os.lstat(path)
            except (OSError, ValueError):
                self._lstats[path] = None
        return self._lstats[path]

    def _walk(self, path: str, depth: int = 0) -> str | None:
        """``path`` resolved (None: a part is missing), raising if any directory or link it crosses
        changed at or after the start: a rename (``mv`` of a directory) or a retargeted link
        (``ln -sfn``) gives the moved inode or the new link a new ctime."""
        if path in self._walked:
            return self._walked[path]
        if depth > 40:
            raise _Unpersistable(f"{path}: too many levels of symbolic links")
        parent, name = os.path.split(path)
        if not name:  # the root, or a trailing separator
            resolved: str | None = parent if parent == path else self._walk(parent, depth)
            if resolved is not None:
                self._check(resolved, self._lstat(resolved))
            self._walked[path] = resolved
            return resolved
        base = self._walk(parent, depth)
        if base is None:
            resolved = None
        elif name in (".", ".."):
            resolved = base if name == "." else os.path.dirname(base)
        else:
            here = os.path.join(base, name)
            st = self._lstat(here)
            if st is None:  # missing: its directory must not have gained or lost an entry since
                self._check(base, self._lstat(base), shared=False)
                resolved = None
            else:
                self._check(here, st)
                if stat.S_ISLNK(st.st_mode):
                    try:
                        target = os.readlink(here)
                    except OSError:
                        raise _Unpersistable(f"{here} cannot be read back") from None
                    resolved = self._walk(os.path.join(base, target), depth + 1)
                else:
                    resolved = here
        self._walked[path] = resolved
        return resolved

    def _check(self, path: str, st: os.stat_result | None, *, shared: bool = True) -> None:
        """Raise if ``path`` changed at or after the start. A directory above the compile's search
        directories, crossed on the way (``shared``), must be the very one it was at the start
        (:func:`anchors`): its timestamps change with any file anyone adds there (``/tmp``), its
        identity only if it was replaced. A root-owned sticky directory (``/tmp``) is let be for the
        same reason: only root can rename it, and each entry below it on the path is checked."""
        if st is None:
            return
        anchor = self.anchors.get(path)
        if anchor is not None and shared:
            if (st.st_dev, st.st_ino) != anchor:
                raise _Unpersistable(f"{path} was replaced while the compile ran (it is on the path of what it read)")
            return
        if max(st.st_mtime_ns, st.st_ctime_ns) < self.started:
            return
        if shared and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and st.st_uid == 0:
            return
        raise _Unpersistable(f"{path} changed while it was compiled (it is on the path of what the compile read)")

    def record(
        self,
        events: Iterable[tuple[int, int, str]],
        source: str,
        main_dir: str,
        search_dirs: Sequence[str],
        pinned_dirs: Sequence[str],
        defines: Sequence[str],
        *,
        follow_pinned: bool,
    ) -> dict[str, Any]:
        files = self.files
        follower = _include_graph.Follower(search_dirs, pinned_dirs, defines, self.is_file, self.read, cwd=self.cwd)
        follower.start(source, main_dir)
        # A #line or line marker renames trace events: a name may be no file, or a file never
        # opened, and what nests under it may have been included by any header.
        nested = [(p, inc) for p, inc in _with_includers(events) if not (p.startswith(_BUILTIN) and os.sep not in p)]
        extra: list[tuple[str, set[str | None]]] = []
        missing = []
        named: set[str] = set()  # #line names that are no file: the compile opened nothing there
        for path, includers in nested:
            if path in files or path in follower.seen:
                continue
            if path in follower.graph.line_names and self._lstat(self.at(path)) is None:
                named.add(path)
                continue
            if not self.is_file(path):
                missing.append(path)
                continue
            follower.add(path)  # reached through a toolkit header, or a #line name that is also a file
            extra.append((path, includers))
        graph = follower.finish()
        if graph.unknown:
            raise _Unpersistable(f"{graph.unknown}: the headers it reads cannot be known")
        if graph.clock:
            raise _Unpersistable(f"{graph.clock}: its binary depends on when it was compiled")
        # No file by that name: a #line name, or a header deleted since, whose directory then
        # changed (the walk above raised). Either way a file appearing there must be noticed.
        searched = set(graph.absent) | set(missing)
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
        # NVRTC may start a quoted search where a #line says the text came from: those directories too.
        firsts = [main_dir, *sorted({os.path.dirname(n) for n in graph.line_names})]
        self._candidates(source, firsts, search_dirs, pinned_dirs, searched, present, follow_pinned)
        empty = [place for place in sorted(searched - set(files) - present - named) if not self.is_file(place)]
        # Recorded all the same (a file appearing there is then noticed), with no claim on their directory.
        empty = sorted({*empty, *(n for n in named if self._lstat(self.at(n)) is None)})
        absent, absent_dirs = _by_directory(empty, self.started, self.cwd, self._lstat)
        return {
            "files": list(files.values()),
            "absent": absent,
            "absent_dirs": absent_dirs,
            "present": sorted(present - set(files)),
        }

    def _candidates(
        self,
        source: str,
        firsts: Sequence[str],
        search_dirs: Sequence[str],
        pinned_dirs: Sequence[str],
        searched: set[str],
        present: set[str],
        follow_pinned: bool,
    ) -> None:
        """Add every lookup any file read may have made (:mod:`._scan`, which only adds): the
        places before where each name is found (all of them where it is not) must stay empty; a
        probe's find must stay; a user's header found is read, recorded and scanned in turn."""
        pinned = tuple(os.path.join(os.path.realpath(d), "") for d in pinned_dirs)

        def is_pinned(path: str) -> bool:
            resolved = self._walk(self.at(path)) if pinned else None  # walked already: memoized
            return resolved is not None and resolved.startswith(pinned)

        # (directory, bytes, a user's file, its sha256 when known: the scan is remembered by it)
        queue: list[tuple[str, bytes | str, bool, str | None]] = [(firsts[0], source, True, None)]
        for p in self.files:
            if p in self.datas:
                queue.append((os.path.dirname(p), self.datas[p], not is_pinned(p), self.files[p][1]))
        done = set(self.files)
        while queue:
            here, data, users, digest = queue.pop()
            found = _scanned(data, users, digest)
            if found.unknown:
                raise _Unpersistable(f"{found.unknown}: the headers it reads cannot be known")
            if found.clock:
                raise _Unpersistable(f"a file it read uses {found.clock}: its binary depends on when it was compiled")
            for is_probe, (every, spelled) in [(False, c) for c in sorted(found.includes)] + [
                (True, c) for c in sorted(found.probes)
            ]:
                for place in _places(spelled, [here, *firsts], search_dirs):
                    if not self.is_file(place):
                        searched.add(place)
                        continue
                    if is_probe:
                        present.add(place)
                    elif place not in done and (follow_pinned or not is_pinned(place)):
                        done.add(place)
                        user = not is_pinned(place)
                        if user:
                            data, digest = self.read(place), self.files[place][1]
                        else:
                            _, digest, data = _read_pinned(self.at(place))
                        queue.append((os.path.dirname(place), data, user, digest))
                    if not every:
                        break


def _places(spelled: str, firsts: Sequence[str], search_dirs: Sequence[str]) -> list[str]:
    """Every place a lookup of ``spelled`` may search, in order: a quoted name starts in ``firsts``
    (the includer's directory, the source's, those a #line names), then the search path."""
    name = spelled[1:-1]
    if not name:
        return []
    if os.path.isabs(name):
        return [name]
    dirs = list(dict.fromkeys(firsts)) if spelled[0] == '"' else []
    return [os.path.join(d, name) for d in (*dirs, *search_dirs)]


def _scanned(data: bytes | str, users: bool, digest: str | None) -> _scan.Candidates:
    """:func:`._scan.scan`, remembered per content (``digest``: its sha256, known for a header read;
    toolkit headers recur in every compile). The source (no digest) is scanned each time."""
    if digest is None:
        return _scan.scan(data, clock=users)
    found = _scans.get((digest, users))
    if found is None:
        found = _scans[(digest, users)] = _scan.scan(data, clock=users)
    return found


_scans: dict[tuple[str, bool], _scan.Candidates] = {}


def _read_pinned(path: str) -> tuple[_Stat, str, bytes]:
    """A toolkit header's stat, sha256 and bytes (pinned by the toolchain: scanned, not recorded)."""
    try:
        return _read(path)
    except OSError as exc:
        raise _Unpersistable(f"toolkit header {path} cannot be read ({exc.strerror})") from None


def anchors(dirs: Iterable[str], cwd: str) -> dict[str, tuple[int, int]]:
    """``{directory: (st_dev, st_ino)}`` of every directory above ``dirs`` and ``cwd`` (resolved),
    taken at a compile's start: :func:`record` requires them unchanged rather than untouched."""
    out: dict[str, tuple[int, int]] = {}
    for d in {cwd, *dirs}:
        parent = os.path.dirname(os.path.realpath(os.path.join(cwd, d)))
        while parent not in out:
            st = _lstat(parent)
            if st is not None and stat.S_ISDIR(st.st_mode):
                out[parent] = (st.st_dev, st.st_ino)
            if os.path.dirname(parent) == parent:
                break
            parent = os.path.dirname(parent)
    return out


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (OSError, ValueError):
        return None


def _by_directory(
    places: list[str], started: int, cwd: str, lstat: Callable[[str], os.stat_result | None]
) -> tuple[list[str], list[list[Any]]]:
    """Empty places, most of them grouped by directory: ``(alone, [[dir, its stat or None, names]])``.

    A directory whose stat (inode, mtime, ctime) is unchanged has had no entry added, removed
    or renamed, so every name that was missing there still is: one stat instead of one per
    place (a CUB include searches ~1,300 places). A directory that does not exist stays
    empty until it appears, which changes its stat: places under a missing directory are grouped
    under the shallowest one missing (names relative to it), so ``inc/cuda/std/...`` costs one stat
    while ``inc/cuda`` is missing. Places that exist as something (a dangling link, a directory)
    are checked alone: their target can appear without the directory changing; so are those in a
    directory changed since the compile started.
    """
    alone: list[str] = []
    groups: dict[str, list[str]] = {}
    for place in places:
        if lstat(os.path.join(cwd, place)) is not None:
            alone.append(place)
            continue
        directory, name = os.path.split(place)
        while directory and os.path.dirname(directory) != directory and lstat(os.path.join(cwd, directory)) is None:
            above, last = os.path.split(directory)
            if not above or lstat(os.path.join(cwd, above)) is None:
                directory, name = above, os.path.join(last, name)
                continue
            break
        groups.setdefault(directory, []).append(name)
    dirs = []
    for directory, names in sorted(groups.items()):
        st = _stat(os.path.join(cwd, directory or "."))
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
    # The clock now; its tick (a constant) only where a touched header needs the comparison.
    clock = _clock_ns()
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
        if max(now[3], now[4]) < clock - _tick_ns():  # not changing now: its new stat can be trusted later
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


def _snapshot(path: str, at: str, started: int) -> tuple[list[Any], bytes]:
    """``[path, sha256, *stat]`` of the header NVRTC spelled ``path`` (found at ``at``) and its bytes;
    refused unless it is older than the compile and the path still names the file that was hashed."""
    try:
        st, digest, data = _read(at)
    except FileNotFoundError:
        raise  # a #line name, or a header gone: the caller tells which
    except OSError as exc:
        raise _Unpersistable(f"header {path} cannot be read back ({exc.strerror})") from None
    if max(st[3], st[4]) >= started:
        raise _Unpersistable(f"header {path} changed while it was compiled")
    if max(st[3], st[4]) >= started - writeback_ns():
        writer = mapped_for_writing(st[0], st[1])
        if writer is not None:
            raise _Unpersistable(
                f"header {path} is mapped for writing by process {writer}: a write through that mapping "
                "changes it without changing its mtime until the page is written back"
            )
    again = _stat(at)  # read through a descriptor: the name must still lead to that file
    if again is None or _key(again) != st:
        raise _Unpersistable(f"header {path} was replaced while it was read")
    if at == path:
        _digests[path] = (st, digest)
    return [path, digest, *st], data


def writeback_ns() -> int:
    """How long a page written through a shared mapping may stay dirty (Linux: vm.dirty_expire_centisecs
    plus one vm.dirty_writeback_centisecs pass, 35 s by default), with a margin. Until it is written back,
    later writes through a mapping that already wrote it change the file and not its mtime or ctime;
    after, the page is write-protected again and the next write stamps the file."""
    if not _writeback_memo:
        total = 0
        for name, default in (("dirty_expire_centisecs", 3000), ("dirty_writeback_centisecs", 500)):
            try:
                with open(f"/proc/sys/vm/{name}", "rb") as fh:
                    total += int(fh.read().strip() or default)
            except (OSError, ValueError):
                total += default
        _writeback_memo.append(total * 10**7 + 10 * 10**9)
    return _writeback_memo[0]


_writeback_memo: list[int] = []


def mapped_for_writing(device: int, inode: int) -> int | None:
    """The pid of a process (one this user may inspect) holding file ``(device, inode)`` in a shared
    writable mapping (``/proc/<pid>/maps``), or None. Asked only for a header stamped within the
    writeback window before a compile: only such a mapping can rewrite it unstamped."""
    want = f"{os.major(device):02x}:{os.minor(device):02x} {inode} "
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None  # no /proc (not Linux): no such mappings to look for
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "rb") as fh:
                text = fh.read().decode("ascii", "replace")
        except OSError:
            continue  # gone, or another user's
        for line in text.splitlines():
            fields = line.split(None, 5)
            if len(fields) >= 5 and f"{fields[3]} {fields[4]} " == want and fields[1][1] == "w" and fields[1][3] == "s":
                return int(pid)
    return None


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

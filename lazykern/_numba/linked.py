"""The headers of CUDA C++ linked into a ``@lazy_kernel``: recorded when it compiles, verified when it loads.

numba-cuda compiles each linked ``.cu`` (a path or a ``CUSource``) with its own NVRTC call, named by
the file's base name (``CUSource.name``), so quoted includes of the file itself are searched in the
working directory, then numba-cuda's include path (:func:`search_dirs`). There is no trace of that
call, so what it may read is over-approximated, by models that may only add
(:func:`lazykern.compile._manifest.record` with ``follow_pinned``): the preprocessor's model
(:mod:`lazykern.compile._include_graph`) and a scan that takes every include and ``__has_include``
operand wherever it appears, strings and comments included (:mod:`lazykern.compile._scan`), followed
into every header found, toolkit headers too (CCCL probes the user's directories first). Each
user header is recorded with its digest and stat, every place searched before it must stay empty,
every probe's find must stay; all of it under ccache's rule (nothing on a path changed since the
compile's start). An include or probe whose operand a macro supplies makes the kernel memory-only,
with the construct named.

The key (:mod:`.key`) holds each linked file's bytes and numba-cuda's extra search path; the headers
are not in it: a warm hit checks the recorded manifest by stat (:func:`verify`), lexing nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import Any

from ..compile import _manifest
from . import internals


def search_dirs() -> tuple[list[str], list[str]]:
    """(numba-cuda's NVRTC include path in its order, the toolkit's and numba-cuda's own among them)."""
    from ..compile.compiler import system_include_dirs

    numba_cuda = internals.package_dir()
    pinned = [
        *(os.path.join(numba_cuda, "include", v) for v in ("12", "13")),
        *system_include_dirs(),
        os.path.join(numba_cuda, "memory_management"),
    ]
    return [*pinned, *extra_dirs()], pinned


def extra_dirs() -> list[str]:
    """``NUMBA_CUDA_NVRTC_EXTRA_SEARCH_PATHS``, searched after numba-cuda's own directories."""
    return [d for d in (getattr(internals.numba_config(), "CUDA_NVRTC_EXTRA_SEARCH_PATHS", "") or "").split(":") if d]


def cuda_sources(items: Iterable[Any]) -> list[tuple[str, bytes, str | None]]:
    """(NVRTC program name, bytes, path or None for a code object) of each CUDA C++ item linked.

    numba-cuda names a file's program by its base name (so its quoted includes start in the
    working directory) and a ``CUSource``'s by its ``name``."""
    out = []
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            path = os.fspath(item)
            if path.endswith(".cu"):
                data = read_regular(path)
                if data is not None:
                    out.append((os.path.basename(path), data, path))
        elif getattr(item, "kind", None) == "cu":
            data = getattr(item, "data", b"")
            data = data.encode() if isinstance(data, str) else bytes(data)
            out.append((str(getattr(item, "name", "")), data, None))
    return out


def read_regular(path: str) -> bytes | None:
    """A linked file's bytes; only a regular file is read (a FIFO or device must not hang the key)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read()
    finally:
        os.close(fd)


def anchors() -> dict[str, tuple[int, int]]:
    """The directories above a linked compile's search directories and the working directory, each
    one's identity, taken at the compile's start (:func:`lazykern.compile._manifest.anchors`): anyone
    may add a file beside them (``/tmp/pytest-of-root``), but none may be replaced."""
    return _manifest.anchors(search_dirs()[0], os.getcwd())


def record(
    sources: Iterable[tuple[str, bytes, str | None]], started: int, at_start: dict[str, tuple[int, int]] | None = None
) -> tuple[list[list[Any]], str]:
    """``([[program name, header manifest], ...], "")``, or ``([], why the binary must stay in memory)``.

    ``started``: :func:`lazykern.compile._manifest.start_ns` taken before the compile (a header
    changed since then is not trusted); ``at_start``: :func:`anchors` taken then (None: every
    directory on a path is held to that rule, its timestamps too).
    """
    dirs, pinned = search_dirs()
    out: list[list[Any]] = []
    for name, data, path in sources:
        if path is not None and _changed_since(path, started):
            return [], f"linked CUDA C++ {path!r} changed while it was compiled"
        text = data.decode("utf-8", "surrogateescape")
        manifest, why = _manifest.record(
            (),
            source=text,
            main_dir=os.path.dirname(name),
            search_dirs=dirs,
            started=started,
            pinned_dirs=pinned,
            follow_pinned=True,
            anchors=at_start,
        )
        if manifest is None:
            return [], f"linked CUDA C++ {path or name!r}: {why}"
        out.append([name, manifest])
    return out, ""


def _changed_since(path: str, started: int) -> bool:
    """A linked file written at or after the compile's start: the key may hold other bytes than NVRTC read."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False  # gone since: its bytes were read (and keyed) already
    return max(st.st_mtime_ns, st.st_ctime_ns) >= started


def verify(records: Any) -> str | None:
    """``None`` while every linked file's headers read as recorded (stat first), else why not."""
    if not isinstance(records, list):
        return "the entry's record of its linked headers is malformed"
    for item in records:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            return "the entry's record of its linked headers is malformed"
        try:
            why, _refreshed = _manifest.verify(item[1])
        except ValueError as exc:
            return f"linked CUDA C++ {item[0]!r}: {exc}"
        if why is not None:
            return f"linked CUDA C++ {item[0]!r}: {why}"
    return None

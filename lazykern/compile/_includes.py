"""Which header files a compile reads, resolved the way NVRTC resolves them, and their digest.

NVRTC (13.x) cannot list the files it read (it has no ``-M``/dependency
output), so the key follows the includes itself, with NVRTC's search rules
(checked against NVRTC 13.5 in ``tests/test_includes.py``):

* ``#include "x"``: the including file's directory (for the source itself: the
  working directory), then each ``-I`` directory in order, then the CUDA/CCCL
  header directories; ``#include <x>``: the ``-I`` directories, then the
  CUDA/CCCL ones; an absolute name is opened as it is. Paths are joined, never
  normalized, so a symlinked directory and ``..`` resolve as the OS resolves
  them for NVRTC.
* Every directive is followed, whatever ``#if`` surrounds it (a superset is
  safe); ``__has_include`` and ``#include_next`` too (the latter by every
  match). ``#include MACRO`` is followed through ``#define``\\ s and ``-D``.
* Each record is (directive, path found or "absent", sha256 of its bytes), so
  editing a header, adding one that shadows another, or deleting one changes
  the digest.
* Headers found in the CUDA/CCCL directories are not read: the toolchain
  fingerprint (NVRTC and CCCL versions) pins them.

Only regular files are read (opened non-blocking, checked with ``fstat``), at
most ``MAX_HEADER_BYTES`` each and ``MAX_FILES`` in all; directories are never
walked. A FIFO, ``/dev/zero`` or ``/proc`` file named by an include cannot hang
or flood key computation.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Sequence

MAX_HEADER_BYTES = 64 << 20
MAX_FILES = 20_000
_CHUNK = 1 << 20
_DIRECTIVE = re.compile(
    r"^[ \t]*#[ \t]*(include_next|include|import)[ \t]*(.*?)[ \t]*$"
    r"|__has_include(_next)?[ \t]*\([ \t]*([<\"][^>\"\n]*[>\"])",
    re.M,
)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(.+?)[ \t]*$", re.M)
# String and character literals are matched first so that a "//" or "/*" inside one is not a comment.
_COMMENT = re.compile(r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|//[^\n]*|/\*.*?\*/", re.S)
_FALLBACK_ENTRIES = 4096
_LITERAL = re.compile(r'"[^"\n]*"|<[^>\n]*>')
_CONTINUATION = re.compile(r"\\\r?\n")


def include_digest(
    source: str, search_dirs: Sequence[str], pinned_dirs: Sequence[str], defines: Sequence[str] = ()
) -> str:
    """sha256 over the manifest of every header ``source`` can reach; see :func:`include_manifest`."""
    manifest = include_manifest(source, search_dirs, pinned_dirs, defines)
    return hashlib.sha256(json.dumps(manifest).encode()).hexdigest()


def include_manifest(
    source: str,
    search_dirs: Sequence[str],
    pinned_dirs: Sequence[str],
    defines: Sequence[str] = (),
    source_dir: str | None = None,
) -> list[list[str]]:
    """``[directive as written, kind:path found (or "absent"), content digest]`` per directive and match.

    ``search_dirs`` are the ``-I`` directories in NVRTC's order; headers found
    in ``pinned_dirs`` (the toolchain's) are recorded by path, not read.
    ``source_dir`` is where quoted includes of the source itself are searched
    (NVRTC: the working directory). Cheap when nothing is included: one regex scan.
    """
    return _Resolver(search_dirs, pinned_dirs, defines).run(source, os.getcwd() if source_dir is None else source_dir)


def _blank_comment(m: re.Match[str]) -> str:
    text = m.group(0)
    return text if text[0] in "\"'" else " "


class _Resolver:
    def __init__(self, search_dirs: Sequence[str], pinned_dirs: Sequence[str], defines: Sequence[str]) -> None:
        self.dirs = [os.path.abspath(d) for d in search_dirs]
        self.pinned = {os.path.abspath(d) for d in pinned_dirs}
        self.pinned_real = tuple(os.path.realpath(d) + os.sep for d in pinned_dirs)
        self.macros: dict[str, str] = {}
        for d in defines:
            name, _, value = d.partition("=")
            self.macros[name.strip()] = value.strip() or "1"
        self.manifest: list[list[str]] = []
        self.done: set[tuple[int, int]] = set()
        self.queue: list[tuple[str, str]] = []

    def run(self, source: str, source_dir: str) -> list[list[str]]:
        self.queue.append((source, source_dir))
        while self.queue:
            if len(self.done) > MAX_FILES:
                self.manifest.append(["<too many headers>", "", str(len(self.done)), ""])
                break
            text, here = self.queue.pop(0)
            self._scan(text, here)
        return self.manifest

    def _scan(self, text: str, here: str) -> None:
        text = _CONTINUATION.sub("", text)  # splices first: "#inc\<newline>lude" is an include
        if "include" not in text and "import" not in text:
            return
        text = _COMMENT.sub(_blank_comment, text)
        for m in _DEFINE.finditer(text):
            self.macros.setdefault(m.group(1), m.group(2))
        for m in _DIRECTIVE.finditer(text):
            if m.group(4) is not None:  # __has_include("x") / __has_include_next(<x>)
                self._follow(m.group(4), here, every=bool(m.group(3)))
            else:
                self._follow(m.group(2), here, every=m.group(1) == "include_next")

    def _follow(self, operand: str, here: str, every: bool) -> None:
        spelled = self._expand(operand)
        if spelled is None:
            self._unresolved(operand, here)
            return
        name, quoted = spelled[1:-1], spelled[0] == '"'
        if os.path.isabs(name):
            candidates = [("", name)]
        else:
            dirs = ([here] if quoted else []) + self.dirs
            candidates = [(d, os.path.join(d, name)) for d in dirs]
        for directory, path in candidates:
            kind, digest, text = self._read(path, pinned=directory in self.pinned)
            if kind == "absent":
                continue
            self.manifest.append([spelled, f"{kind}:{path}", digest])
            if text is not None:
                self.queue.append((text, os.path.dirname(path)))
            if kind != "special" and not every:
                return
        if not every:
            self.manifest.append([spelled, "absent", ""])

    def _unresolved(self, operand: str, here: str) -> None:
        """``#include`` of something we cannot expand: key every header at the top of each search dir."""
        self.manifest.append([operand, "unresolved", ""])
        for directory in [here, *(d for d in self.dirs if d not in self.pinned)]:
            try:
                with os.scandir(directory) as it:
                    names = sorted(e.name for _, e in zip(range(_FALLBACK_ENTRIES), it))
            except OSError:
                continue
            for name in names:
                path = os.path.join(directory, name)
                kind, digest, _ = self._read(path, pinned=False)
                if kind not in ("absent", "special"):
                    self.manifest.append([operand, f"{kind}:{path}", digest])

    def _expand(self, operand: str) -> str | None:
        """``"x.h"`` / ``<x.h>`` as written, or through object-like macros (up to 16 deep)."""
        for _ in range(16):
            operand = operand.strip()
            literal = _LITERAL.match(operand)
            if literal:
                return literal.group(0)
            m = re.match(r"[A-Za-z_]\w*", operand)
            if m is None or m.group(0) not in self.macros:
                return None
            operand = self.macros[m.group(0)]
        return None

    def _read(self, path: str, *, pinned: bool) -> tuple[str, str, str | None]:
        """(kind, sha256, text to scan): "file", "pinned", "special", "oversize", "unreadable" or "absent"."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return "absent", "", None
        except NotADirectoryError:
            return "absent", "", None
        except OSError as exc:
            return "unreadable", type(exc).__name__, None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return "special", stat.filemode(st.st_mode)[0], None
            if pinned or os.path.realpath(path).startswith(self.pinned_real):
                return "pinned", "", None  # the toolchain fingerprint covers it
            if st.st_size > MAX_HEADER_BYTES:  # never read: no header is this large (/proc/kcore is)
                return "oversize", f"{st.st_size}:{st.st_mtime_ns}", None
            data = bytearray()
            while len(data) < MAX_HEADER_BYTES:  # /proc files report size 0: the cap still holds
                chunk = os.read(fd, min(_CHUNK, MAX_HEADER_BYTES - len(data)))
                if not chunk:
                    break
                data += chunk
            digest = hashlib.sha256(data).hexdigest()
            ident = (st.st_dev, st.st_ino)
            if ident in self.done:
                return "file", digest, None  # already scanned: record, do not scan again
            self.done.add(ident)
            return "file", digest, data.decode("utf-8", "replace")
        except OSError as exc:  # /proc/self/mem and friends refuse reads
            return "unreadable", type(exc).__name__, None
        finally:
            os.close(fd)

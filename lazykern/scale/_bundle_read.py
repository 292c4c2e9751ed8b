"""Reading a bundle safely: one member at a time, under a budget, refusing broken framing with one line.

Nothing is extracted to disk and nothing is read whole: the decompressed stream has
a total budget, members and PAX / GNU long-name headers have size caps (checked
before tarfile reads them), and the manifest is bounded in size, nesting and
object count before it is parsed. Every tar / gzip / zstd error becomes one
:class:`BundleError` line.
"""

from __future__ import annotations

import json
import os
import re
import struct
import tarfile
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any, Protocol, cast

from ..errors import BundleError
from ..store import _entry

BUNDLE_FORMAT = "lazykern-bundle"
BUNDLE_SCHEMA = 1
MANIFEST = "manifest.json"
MAX_MEMBER = 64 << 20  # one cubin is a few hundred KiB; anything this big is not ours
MAX_MANIFEST = 8 << 20
MAX_MEMBERS = 50_000
MAX_TOTAL = 4 << 30  # decompressed bytes one pass may read
MAX_TAR_HEADER = 64 << 10  # a PAX or GNU long-name header (tarfile reads it whole)
_MANIFEST_DEPTH = 8
_ENTRY_RE = re.compile(r"^entries/([0-9a-f]{32,128})\.lzk$")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b"


def zstd_module() -> Any:
    try:
        import zstandard
    except ImportError:
        raise BundleError(
            ".tar.zst bundles need the 'zstandard' package: pip install zstandard (or use .tar.gz)"
        ) from None
    return zstandard


class _Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class _Budget:
    """A read-only stream that refuses to deliver more than ``limit`` decompressed bytes."""

    def __init__(self, raw: _Readable, limit: int) -> None:
        self.raw = raw
        self.limit = limit
        self.left = limit

    def read(self, n: int = -1) -> bytes:
        n = 1 << 20 if n is None or n < 0 else n
        data = self.raw.read(min(n, self.left + 1))
        self.left -= len(data)
        if self.left < 0:
            raise BundleError(f"bundle expands to more than {self.limit} bytes (decompression bomb?); refusing it")
        return data


class _GuardedInfo(tarfile.TarInfo):
    """A TarInfo that refuses, before tarfile reads them whole, oversized PAX / long-name headers and sparse files."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, *tarfile.GNU_TYPES):
            if self.type == tarfile.GNUTYPE_SPARSE:
                raise BundleError(f"bundle member {self.name!r} is a sparse file (refusing the bundle)")
            if self.size > MAX_TAR_HEADER:
                raise BundleError(
                    f"bundle has a {self.size}-byte tar extended header, over the {MAX_TAR_HEADER}-byte limit "
                    "(refusing the bundle)"
                )
        # _proc_member is tarfile's private hook, absent from typeshed.
        member: tarfile.TarInfo = cast(Any, super())._proc_member(tarfile_)
        return member


def _open_stream(fh: IO[bytes]) -> _Readable:
    """The decompressed tar stream, chosen by the file's magic bytes, not its name."""
    head = fh.read(4)
    fh.seek(0)
    if head.startswith(_ZSTD_MAGIC):
        reader: _Readable = zstd_module().ZstdDecompressor().stream_reader(fh)
        return reader
    if head.startswith(_GZIP_MAGIC):
        import gzip

        return gzip.GzipFile(fileobj=fh, mode="rb")
    return fh


def _framing_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [
        OSError,
        tarfile.TarError,
        EOFError,
        ValueError,
        zlib.error,
        struct.error,
        RecursionError,
    ]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def iter_members(
    path: str | os.PathLike[str],
    *,
    want: Callable[[str], bool] = lambda name: True,
    max_member: int = MAX_MEMBER,
    max_total: int = MAX_TOTAL,
) -> Iterator[tuple[str, bytearray | None]]:
    """(name, bytes) of each member in order, one at a time, after checking its header.

    Members ``want(name)`` declines are skipped unread (their data is None).
    Raises BundleError (one line) at the first member that is not a regular file
    with an allowed name and size, and for any tar / gzip / zstd framing error.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            stream = _Budget(_open_stream(fh), max_total)
            # typeshed wants a fileobj with write/seek/tell too, which the stream mode "r|" never calls.
            with tarfile.open(fileobj=stream, mode="r|", tarinfo=_GuardedInfo) as tar:  # type: ignore[call-overload]
                for count, info in enumerate(tar):
                    _check_member(info, max_member)
                    if count >= MAX_MEMBERS:
                        raise BundleError(f"bundle {path!r} has more than {MAX_MEMBERS} members; refusing it")
                    yield info.name, _read_member(tar, info, path) if want(info.name) else None
            while stream.read(1 << 20):  # to the end, so gzip / zstd check their trailers (CRC, length)
                pass
    except BundleError:
        raise
    except _framing_errors() as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BundleError(f"{path!r} is not a readable lazykern bundle: {detail}") from None


def _read_member(tar: tarfile.TarFile, info: tarfile.TarInfo, path: str) -> bytearray:
    """A member's bytes in one buffer, filled in small pieces (one whole read would hold it three times)."""
    data = bytearray(info.size)
    src = tar.extractfile(info)
    if src is None or _entry.readinto_exactly(src, memoryview(data)) != info.size:
        raise BundleError(f"member {info.name!r} is truncated in {path!r}")
    return data


def _check_member(info: tarfile.TarInfo, max_member: int) -> None:
    name = info.name
    if not info.isfile():
        kind = "link" if (info.issym() or info.islnk()) else "device" if (info.ischr() or info.isblk()) else "non-file"
        raise BundleError(f"bundle member {name!r} is a {kind}; bundles hold regular files only (refusing the bundle)")
    if name.startswith("/") or "\\" in name or ".." in name.split("/") or name != os.path.normpath(name):
        raise BundleError(f"bundle member {name!r} has an unsafe path (refusing the bundle)")
    if name != MANIFEST and not _ENTRY_RE.match(name):
        raise BundleError(f"bundle member {name!r} is not {MANIFEST} or entries/<key>.lzk (refusing the bundle)")
    limit = MAX_MANIFEST if name == MANIFEST else max_member
    if info.size > limit:
        raise BundleError(f"bundle member {name!r} is {info.size} bytes, over the {limit}-byte limit (refusing it)")


def scan_bundle(
    path: str | os.PathLike[str], *, max_member: int = MAX_MEMBER, max_total: int = MAX_TOTAL
) -> dict[str, Any]:
    """First pass: check the whole bundle's framing; return its manifest. Holds one member at a time."""
    path = os.fspath(path)
    manifest: dict[str, Any] | None = None
    seen: set[str] = set()
    for name, data in iter_members(path, want=MANIFEST.__eq__, max_member=max_member, max_total=max_total):
        if name in seen:
            raise BundleError(f"bundle {path!r} holds {name!r} twice; refusing it")
        seen.add(name)
        if data is not None:
            manifest = _load_manifest(bytes(data), path)
        elif manifest is None:
            raise BundleError(
                f"{path!r} has no {MANIFEST} before its entries; it was not written by `lazykern cache export`"
            )
    if manifest is None:
        raise BundleError(f"{path!r} has no {MANIFEST}; it was not written by `lazykern cache export`")
    manifest["_members"] = sorted(k for n in seen if (k := key_of(n)))
    return manifest


def _load_manifest(raw: bytes, path: str) -> dict[str, Any]:
    # Bounded before parsing: a few MB of "[[],[],..." would otherwise become hundreds of MB of objects.
    fields = max(raw.count(b":"), raw.count(b","), raw.count(b"[") + raw.count(b"{"))
    if _entry.too_deep(raw, _MANIFEST_DEPTH) or fields > 4 * MAX_MEMBERS + 64:
        raise BundleError(f"{MANIFEST} in {path!r} nests too deep or holds too many fields (refusing it)")
    try:
        manifest = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BundleError(f"{MANIFEST} in {path!r} is not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"{path!r} is not a {BUNDLE_FORMAT} (bad manifest)")
    if manifest.get("bundle_schema") != BUNDLE_SCHEMA:
        raise BundleError(
            f"{path!r} has bundle schema {str(manifest.get('bundle_schema'))[:40]}; this lazykern reads schema "
            f"{BUNDLE_SCHEMA}: export it again with this version"
        )
    if not isinstance(manifest.get("entries"), list):
        raise BundleError(f"{MANIFEST} in {path!r} lists no entries")
    return manifest


def key_of(name: str) -> str | None:
    m = _ENTRY_RE.match(name)
    return m.group(1) if m else None

"""Ship a warmed kernel cache to another machine: export to, import from, a tar bundle.

A bundle is a tar (plain, ``.tar.gz`` or ``.tar.zst``) of

* ``manifest.json``: bundle schema, entry schema, NVRTC version, toolchain
  fingerprint and, per entry, its key and the sha256 of its bytes;
* ``entries/<key>.lzk``: one cache value each, the exact bytes of
  :mod:`lazykern._entry` (JSON header with the binary's sha256, then the binary).

Importing treats the bundle as hostile input. Members are read into memory,
never extracted to disk; any path trick (absolute name, ``..``, a link, a
device, a name that is not ``entries/<hex>.lzk``) or an oversized member
refuses the whole bundle. Each entry is then checked on its own (digest, entry
schema, toolchain, and its key recomputed from the family source where that
family is known here) and skipped, with a reason, when a check fails. Nothing
is ever unpickled: a value that is not a well-formed entry is just bytes that
fail the header check.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import re
import tarfile
import time
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

from . import _entry
from .cache import SCHEMA_VERSION, KernelCache
from .errors import BundleError
from .families import loaded as registered_families

log = logging.getLogger("lazykern")

BUNDLE_FORMAT = "lazykern-bundle"
BUNDLE_SCHEMA = 1
MANIFEST = "manifest.json"
MAX_MEMBER = 256 << 20  # one cubin is a few hundred KiB; anything this big is not ours
MAX_MANIFEST = 64 << 20
MAX_MEMBERS = 200_000
_ENTRY_RE = re.compile(r"^entries/([0-9a-f]{32,128})\.lzk$")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass
class ExportReport:
    path: str
    keys: list[str]
    bytes: int
    compression: str


@dataclasses.dataclass
class ImportReport:
    path: str
    imported: list[str] = dataclasses.field(default_factory=list)
    present: list[str] = dataclasses.field(default_factory=list)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # key -> why
    warnings: list[str] = dataclasses.field(default_factory=list)


def compression_for(path: str | os.PathLike) -> str:
    """``"zst"``, ``"gz"`` or ``""`` from the file name (``.tar.zst``, ``.tar.gz``, ``.tar``)."""
    name = os.fspath(path).lower()
    if name.endswith((".tar.zst", ".tzst", ".tar.zstd")):
        return "zst"
    if name.endswith((".tar.gz", ".tgz")):
        return "gz"
    if name.endswith(".tar"):
        return ""
    raise BundleError(f"bundle name {os.fspath(path)!r} must end in .tar.zst, .tar.gz or .tar")


def _zstd():
    try:
        import zstandard
    except ImportError:
        raise BundleError(
            ".tar.zst bundles need the 'zstandard' package: pip install zstandard (or use .tar.gz)"
        ) from None
    return zstandard


def _select(cache: KernelCache, family: str | None, arch: str | None) -> Iterable[dict[str, Any]]:
    for row in cache.entries():
        if family is not None and row.get("family") != family:
            continue
        if arch is not None and row.get("arch") != arch:
            continue
        yield row


def export_bundle(
    cache: KernelCache,
    path: str | os.PathLike,
    *,
    family: str | None = None,
    arch: str | None = None,
) -> ExportReport:
    """Write the entries of ``cache`` (optionally one family / arch) to ``path``.

    The file is written under a temporary name and moved into place, so a
    reader never sees half a bundle.
    """
    from .compiler import nvrtc_version, toolchain_fingerprint

    path = os.fspath(path)
    compression = compression_for(path)
    blobs: dict[str, bytes] = {}
    for row in _select(cache, family, arch):
        entry = cache.lookup(row["key"])
        if entry is not None:
            blobs[row["key"]] = _entry.encode(entry.code, entry.meta)
    manifest = {
        "format": BUNDLE_FORMAT,
        "bundle_schema": BUNDLE_SCHEMA,
        "entry_schema": SCHEMA_VERSION,
        "nvrtc": ".".join(map(str, nvrtc_version())),
        "toolchain": toolchain_fingerprint(),
        "created": time.time(),
        "filters": {"family": family, "arch": arch},
        "entries": [
            {"key": key, "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}
            for key, blob in sorted(blobs.items())
        ],
    }
    raw_tar = io.BytesIO()
    with tarfile.open(fileobj=raw_tar, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
        for key, blob in sorted(blobs.items()):
            _add(tar, f"entries/{key}.lzk", blob)
    data = raw_tar.getvalue()
    if compression == "zst":
        data = _zstd().ZstdCompressor(level=10).compress(data)
    elif compression == "gz":
        import gzip

        data = gzip.compress(data, compresslevel=6, mtime=0)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        raise BundleError(f"could not write bundle {path!r}: {exc}") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    log.info("exported %d entries to %s (%d bytes)", len(blobs), path, len(data))
    return ExportReport(path, sorted(blobs), len(data), compression or "none")


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _open_stream(fh: IO[bytes]) -> IO[bytes]:
    """The decompressed tar stream, chosen by the file's magic bytes, not its name."""
    head = fh.read(4)
    fh.seek(0)
    if head.startswith(_ZSTD_MAGIC):
        return _zstd().ZstdDecompressor().stream_reader(fh)
    if head.startswith(_GZIP_MAGIC):
        import gzip

        return gzip.GzipFile(fileobj=fh, mode="rb")
    return fh


def read_members(path: str | os.PathLike, *, max_member: int = MAX_MEMBER) -> dict[str, bytes]:
    """Every member of the bundle, by name, read into memory after checking its header.

    Raises BundleError, and returns nothing, at the first member that is not a
    regular file with an allowed name and size.
    """
    path = os.fspath(path)
    members: dict[str, bytes] = {}
    try:
        with open(path, "rb") as fh, tarfile.open(fileobj=_open_stream(fh), mode="r|") as tar:
            for info in tar:
                _check_member(info, max_member)
                if info.name in members:
                    raise BundleError(f"bundle {path!r} holds {info.name!r} twice; refusing it")
                if len(members) >= MAX_MEMBERS:
                    raise BundleError(f"bundle {path!r} has more than {MAX_MEMBERS} members; refusing it")
                src = tar.extractfile(info)
                data = src.read(info.size + 1) if src is not None else b""
                if len(data) != info.size:
                    raise BundleError(f"member {info.name!r} is truncated in {path!r}")
                members[info.name] = data
    except BundleError:
        raise
    except (OSError, tarfile.TarError, EOFError, ValueError) as exc:
        raise BundleError(f"{path!r} is not a readable lazykern bundle: {exc}") from exc
    except Exception as exc:  # zstandard raises its own ZstdError
        if type(exc).__name__ == "ZstdError":
            raise BundleError(f"{path!r} is not a readable .tar.zst bundle: {exc}") from exc
        raise
    return members


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


def _load_manifest(members: Mapping[str, bytes], path: str) -> dict[str, Any]:
    raw = members.get(MANIFEST)
    if raw is None:
        raise BundleError(f"{path!r} has no {MANIFEST}; it was not written by `lazykern cache export`")
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise BundleError(f"{MANIFEST} in {path!r} is not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"{path!r} is not a {BUNDLE_FORMAT} (bad manifest)")
    if manifest.get("bundle_schema") != BUNDLE_SCHEMA:
        raise BundleError(
            f"{path!r} has bundle schema {manifest.get('bundle_schema')!r}; this lazykern reads schema "
            f"{BUNDLE_SCHEMA}: export it again with this version"
        )
    if not isinstance(manifest.get("entries"), list):
        raise BundleError(f"{MANIFEST} in {path!r} lists no entries")
    return manifest


KeyFn = Callable[[str, str], str | None]


def import_bundle(
    cache: KernelCache,
    path: str | os.PathLike,
    *,
    families: Mapping[str, Any] | None = None,
    max_member: int = MAX_MEMBER,
) -> ImportReport:
    """Verify every entry of the bundle at ``path`` and store the good ones in ``cache``.

    ``families`` maps family names to ``KernelFamily`` objects whose keys can be
    recomputed here (default: the built-in families that import); an entry of
    such a family whose key does not match this install's source is skipped.
    """
    from .compiler import nvrtc_version, toolchain_fingerprint

    path = os.fspath(path)
    members = read_members(path, max_member=max_member)
    manifest = _load_manifest(members, path)
    report = ImportReport(path)
    listed: dict[str, str] = {}
    for item in manifest["entries"]:
        if isinstance(item, dict) and isinstance(item.get("key"), str) and isinstance(item.get("sha256"), str):
            listed[item["key"]] = item["sha256"]
    here_nvrtc = ".".join(map(str, nvrtc_version()))
    if manifest.get("toolchain") != toolchain_fingerprint():
        reason = (
            f"built with another toolchain (NVRTC {manifest.get('nvrtc')} vs {here_nvrtc} here, or other CCCL "
            "headers); its keys would never be looked up"
        )
        report.warnings.append(f"{path}: {reason}; skipped every entry")
        for name in members:
            m = _ENTRY_RE.match(name)
            if m:
                report.skipped[m.group(1)] = reason
        return report
    known = dict(registered_families() if families is None else families)
    for name, blob in sorted(members.items()):
        m = _ENTRY_RE.match(name)
        if not m:
            continue
        key = m.group(1)
        why = _verify(key, blob, listed, known, here_nvrtc)
        if why is not None:
            report.skipped[key] = why
            log.warning("bundle %s: skipped entry %s: %s", path, key[:16], why)
            continue
        if cache.lookup(key) is not None:
            report.present.append(key)
            continue
        entry = _entry.decode(blob)
        cache.store(key, entry.code, entry.meta)
        report.imported.append(key)
    for key in sorted(set(listed) - {k for n in members if (k := _key_of(n))}):
        report.skipped[key] = "listed in the manifest but missing from the bundle"
    return report


def _key_of(name: str) -> str | None:
    m = _ENTRY_RE.match(name)
    return m.group(1) if m else None


def _verify(key: str, blob: bytes, listed: Mapping[str, str], known: Mapping[str, Any], nvrtc: str) -> str | None:
    """Why the entry must not be imported, or None when it passes every check."""
    digest = listed.get(key)
    if digest is None:
        return "not listed in the manifest"
    if hashlib.sha256(blob).hexdigest() != digest:
        return "bytes do not match the digest in the manifest"
    try:
        entry = _entry.decode(blob)
    except _entry.EntryError as exc:
        return f"not a lazykern entry ({exc})"
    meta = entry.meta
    if meta.get("schema", SCHEMA_VERSION) != SCHEMA_VERSION:
        return f"entry schema {meta.get('schema')!r}, this lazykern uses {SCHEMA_VERSION}"
    if "nvrtc" in meta and meta["nvrtc"] != nvrtc:
        return f"compiled by NVRTC {meta['nvrtc']}, this machine has {nvrtc}"
    fam = known.get(meta.get("family")) if isinstance(meta.get("family"), str) else None
    kernel, arch = meta.get("kernel"), meta.get("arch")
    if fam is not None and isinstance(kernel, str) and isinstance(arch, str):
        if kernel not in fam.names():
            return f"family {meta['family']!r} here has no kernel {kernel!r}"
        try:
            expected = fam.key(kernel, arch)
        except (ValueError, KeyError) as exc:
            return f"cannot recompute its key: {exc}"
        if expected != key:
            return f"its key does not match {meta['family']}/{kernel} for {arch} as built here (other source?)"
    return None

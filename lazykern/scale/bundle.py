"""Ship a warmed kernel cache to another machine: export to, import from, a tar bundle.

A bundle is a tar (plain, ``.tar.gz`` or ``.tar.zst``) of

* ``manifest.json``: bundle schema, entry schema, NVRTC version, toolchain
  fingerprint and, per entry, its key and the sha256 of its bytes;
* ``entries/<key>.lzk``: one cache value each, the exact bytes of
  :mod:`lazykern.store._entry` (a strict JSON header and the binary, one sha256 over both).

Importing treats the bundle as hostile input. It is streamed twice, one member
at a time, never extracted to disk: the first pass checks the framing, the
second verifies and stores each entry. The decompressed stream has a total
budget, every member and every PAX / GNU long-name header a small size cap, the
manifest a nesting limit; any path trick (absolute name, ``..``, a link, a
device, a name that is not ``entries/<hex>.lzk``) or broken framing refuses the
whole bundle with one :class:`BundleError`. Each entry is then checked on its
own (manifest digest, the entry's own digest over header and code, a complete
header naming its key, schema and toolchain, and its key recomputed from the
family source where that family is known here) and skipped, with a reason,
when a check fails. Nothing is ever unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import tarfile
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import BundleError, CacheError, EntryError, StaleEntry
from ..families import loaded as registered_families
from ..store import _entry
from ..store.cache import SCHEMA_VERSION, KernelCache
from ._bundle_read import (
    BUNDLE_FORMAT,
    BUNDLE_SCHEMA,
    MANIFEST,
    MAX_MEMBER,
    MAX_TOTAL,
    iter_members,
    key_of,
    scan_bundle,
    zstd_module,
)

__all__ = [
    "BundleError",
    "ExportReport",
    "ImportReport",
    "compression_for",
    "export_bundle",
    "import_bundle",
    "iter_members",
    "scan_bundle",
]

log = logging.getLogger("lazykern")


@dataclasses.dataclass
class ExportReport:
    path: str
    keys: list[str]
    bytes: int
    compression: str
    stale: list[str] = dataclasses.field(default_factory=list)  # other versions' entries, left out


@dataclasses.dataclass
class ImportReport:
    path: str
    imported: list[str] = dataclasses.field(default_factory=list)
    present: list[str] = dataclasses.field(default_factory=list)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # key -> why
    not_persisted: dict[str, str] = dataclasses.field(default_factory=dict)  # key -> why
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every entry of the bundle is now in the store."""
        return not self.skipped and not self.not_persisted


def compression_for(path: str | os.PathLike[str]) -> str:
    """``"zst"``, ``"gz"`` or ``""`` from the file name (``.tar.zst``, ``.tar.gz``, ``.tar``)."""
    name = os.fspath(path).lower()
    if name.endswith((".tar.zst", ".tzst", ".tar.zstd")):
        return "zst"
    if name.endswith((".tar.gz", ".tgz")):
        return "gz"
    if name.endswith(".tar"):
        return ""
    raise BundleError(f"bundle name {os.fspath(path)!r} must end in .tar.zst, .tar.gz or .tar")


def _select(cache: KernelCache, family: str | None, arch: str | None) -> Iterable[dict[str, Any]]:
    for row in cache.entries():
        if row.get("kind") == "contraction-plan":  # not a kernel: import would refuse it (no symbol, toolchain)
            continue
        if family is not None and row.get("family") != family:
            continue
        if arch is not None and row.get("arch") != arch:
            continue
        yield row


def export_bundle(
    cache: KernelCache,
    path: str | os.PathLike[str],
    *,
    family: str | None = None,
    arch: str | None = None,
) -> ExportReport:
    """Write the entries of ``cache`` (optionally one family / arch) to ``path``.

    Read only: entries of other lazykern versions are left out (``stale`` in the
    report) and left in the store. The file is written under a temporary name
    and moved into place, so a reader never sees half a bundle.
    """
    from ..compile.compiler import nvrtc_version, toolchain_fingerprint

    path = os.fspath(path)
    compression = compression_for(path)
    blobs: dict[str, bytes] = {}
    stale: list[str] = []
    for row in _select(cache, family, arch):
        entry = None if row["stale"] else cache.peek(row["key"])
        if entry is None:
            stale.append(row["key"])
            continue
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
        data = zstd_module().ZstdCompressor(level=10).compress(data)
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
    log.info("exported %d entries to %s (%d bytes), left out %d stale", len(blobs), path, len(data), len(stale))
    return ExportReport(path, sorted(blobs), len(data), compression or "none", sorted(stale))


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def import_bundle(
    cache: KernelCache,
    path: str | os.PathLike[str],
    *,
    families: Mapping[str, Any] | None = None,
    max_member: int = MAX_MEMBER,
    max_total: int = MAX_TOTAL,
) -> ImportReport:
    """Verify every entry of the bundle at ``path`` and store the good ones in ``cache``.

    ``families`` maps family names to ``KernelFamily`` objects whose keys can be
    recomputed here (default: the built-in families that import); an entry of
    such a family whose key or header does not match this install's source is
    skipped. Every stored entry is read back from the store; one that did not
    persist is listed in ``not_persisted``. Raises BundleError when the bundle
    is refused as a whole, CacheError when ``cache`` keeps entries in memory only.
    """
    from ..compile.compiler import nvrtc_version, toolchain_fingerprint

    path = os.fspath(path)
    if cache.backend != "disk":
        raise CacheError(
            f"the kernel cache is {'read-only' if cache.backend == 'read-only' else 'in memory only'} "
            f"({cache.degraded}); importing {path!r} would persist nothing. "
            "Point LAZYKERN_CACHE_DIR at a writable directory."
        )
    manifest = scan_bundle(path, max_member=max_member, max_total=max_total)
    report = ImportReport(path)
    listed: dict[str, str] = {}
    for item in manifest["entries"]:
        if isinstance(item, dict) and isinstance(item.get("key"), str) and isinstance(item.get("sha256"), str):
            listed[item["key"]] = item["sha256"]
    here = {"nvrtc": ".".join(map(str, nvrtc_version())), "toolchain": toolchain_fingerprint()}
    if manifest.get("toolchain") != here["toolchain"]:
        reason = (
            f"built with another toolchain (NVRTC {str(manifest.get('nvrtc'))[:20]} vs {here['nvrtc']} here, or "
            "other CCCL headers); its keys would never be looked up"
        )
        report.warnings.append(f"{path}: {reason}; skipped every entry")
        report.skipped = dict.fromkeys(manifest["_members"], reason)
        return report
    known = dict(registered_families() if families is None else families)
    # Entries the manifest does not list are never read (skipped below as missing from it).
    members = iter_members(path, want=lambda name: key_of(name) in listed, max_member=max_member, max_total=max_total)
    for name, blob in members:
        key = key_of(name)
        if key is None or blob is None:
            if key is not None:
                report.skipped[key] = "not listed in the manifest"
            continue
        why = _verify(key, blob, listed, known, here)
        if why is not None:
            del blob  # before the next member is read: one member in memory at a time
            report.skipped[key] = why
            log.warning("bundle %s: skipped entry %s: %s", path, key[:16], why)
            continue
        entry = _entry.decode(blob)
        del blob  # one copy of a member at a time: peak memory stays near two entries' size
        if cache.peek(key) is not None:
            report.present.append(key)
            continue
        cache.store(key, entry.code, entry.meta)
        digest = hashlib.sha256(entry.code).digest()
        del entry
        stored = cache.peek(key)  # read back from disk: say so when it did not persist
        if stored is None or hashlib.sha256(stored.code).digest() != digest:
            report.not_persisted[key] = f"not in the store after writing it ({cache.directory})"
        else:
            report.imported.append(key)
    for key in sorted(set(listed) - set(manifest["_members"])):
        report.skipped[key] = "listed in the manifest but missing from the bundle"
    return report


# Every entry must name these; an nvrtc-route entry (a KernelFamily's) the rest of its identity too.
_IDENTITY = ("family", "symbol", "arch")
_NVRTC_IDENTITY = ("kernel", "options", "target", "route", "toolchain")


def _verify(
    key: str, blob: bytes | bytearray, listed: Mapping[str, str], known: Mapping[str, Any], here: dict[str, str]
) -> str | None:
    """Why the entry must not be imported, or None when it passes every check."""
    if hashlib.sha256(blob).hexdigest() != listed[key]:
        return "bytes do not match the digest in the manifest"
    try:
        entry = _entry.decode(blob)
    except StaleEntry as exc:
        return f"written by another lazykern version ({exc})"
    except EntryError as exc:
        return f"not a lazykern entry ({exc})"
    meta = entry.meta
    if meta.get("schema") != SCHEMA_VERSION:
        return f"entry schema {meta.get('schema')!r}, this lazykern uses {SCHEMA_VERSION}"
    if meta.get("key") != key:
        return "its header does not name the key it is stored under"
    nvrtc_route = meta.get("family") != "lazy_kernel"  # @lazy_kernel entries carry a Numba signature instead
    required = _IDENTITY + (_NVRTC_IDENTITY if nvrtc_route else ("name", "signature"))
    missing = [f for f in required if f not in meta]
    if missing:
        return f"its header lacks {', '.join(missing)}: it cannot be verified"
    if "nvrtc" in meta and meta["nvrtc"] != here["nvrtc"]:
        return f"compiled by NVRTC {meta['nvrtc']}, this machine has {here['nvrtc']}"
    if nvrtc_route and meta["toolchain"] != here["toolchain"]:
        return "compiled with another toolchain than this machine's"
    fam = known.get(meta["family"])
    if fam is not None and nvrtc_route:
        return _verify_family(key, meta, fam)
    return None


def _verify_family(key: str, meta: dict[str, Any], fam: Any) -> str | None:
    """Recompute the key and the identity the family would ask for; any difference refuses the entry."""
    kernel, arch = meta["kernel"], meta["arch"]
    if kernel not in fam.names():
        return f"family {meta['family']!r} here has no kernel {kernel!r}"
    try:
        expected = fam.key(kernel, arch)
        frag = fam.source.fragment(kernel)
        options = list(fam.source.options_for(kernel))
    except (ValueError, KeyError) as exc:
        return f"cannot recompute its key: {exc}"
    if expected != key:
        return f"its key does not match {meta['family']}/{kernel} for {arch} as built here (other source?)"
    want = {"symbol": frag.symbol, "options": options, "route": fam.route, "target": "cubin"}
    wrong = [f for f, v in want.items() if meta[f] != v]
    if wrong:
        return f"its header's {', '.join(wrong)} differ from {meta['family']}/{kernel} as built here"
    return None

"""Build what a hostile or unlucky writer could leave behind: entries with any header, raw rows, bundles.

Worker processes import this file by path, so it imports only lazykern and the standard library.
"""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import struct
import tarfile
from typing import Any

from lazykern.store import _entry, _later


def entry_with_raw_header(code: bytes, header: bytes) -> bytes:
    """A format-2 entry whose header is ``header`` verbatim, with a digest that matches (a careful forger)."""
    digest = hashlib.sha256(struct.pack("<IQ", len(header), len(code)) + header + code).digest()
    return _entry.MAGIC + struct.pack("<IQ", len(header), len(code)) + digest + header + code


def entry_with_header(code: bytes, header: dict[str, Any]) -> bytes:
    return entry_with_raw_header(code, json.dumps(header, sort_keys=True).encode())


def decode_unchecked(blob: bytes) -> tuple[dict[str, Any], bytes]:
    """(header, code) of a sound entry, without the schema (to rewrite its header)."""
    if not isinstance(blob, (bytes, bytearray)) or not blob.startswith(_entry.MAGIC):
        raise ValueError("not a format-2 entry")
    n_header, n_code = struct.unpack_from("<IQ", blob, 4)
    start = _entry.PREFIX_SIZE
    return json.loads(blob[start : start + n_header]), blob[start + n_header :]


def db(directory: str) -> sqlite3.Connection:
    _later.wait_all()  # a family's fresh compile is stored once its traced pass answers: read the store after
    con = sqlite3.connect(f"{directory}/cache.db", timeout=30, isolation_level=None)
    return con


def row_value(directory: str, key: str) -> bytes:
    with db(directory) as con:
        ((value,),) = con.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchall()
    return value


def set_row_value(directory: str, key: str, value: Any, mode: int = 1) -> None:
    con = db(directory)
    con.execute("UPDATE Cache SET value = ?, mode = ?, filename = NULL WHERE key = ?", (value, mode, key))
    con.close()


def tar_bytes(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def manifest(entries: dict[str, bytes], toolchain: str, **over: Any) -> tuple[str, bytes]:
    m = {
        "format": "lazykern-bundle",
        "bundle_schema": 1,
        "entry_schema": 2,
        "nvrtc": "x",
        "toolchain": toolchain,
        "entries": [{"key": k, "sha256": hashlib.sha256(b).hexdigest()} for k, b in entries.items()],
    }
    m.update(over)
    return "manifest.json", json.dumps(m).encode()


def bundle(entries: dict[str, bytes], toolchain: str, **over: Any) -> bytes:
    """An uncompressed bundle of ``entries`` (key -> entry bytes) with a manifest that lists them."""
    return tar_bytes([manifest(entries, toolchain, **over), *((f"entries/{k}.lzk", b) for k, b in entries.items())])

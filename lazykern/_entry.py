"""How a cache value is encoded: raw bytes with a small JSON header, never pickle.

Layout: ``MAGIC`` | 4-byte little-endian header length | JSON header | binary.
The header carries the sha256 of the binary, checked on every read, so a
truncated, flipped or swapped blob is caught before it is loaded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from typing import Any

from .errors import EntryError

MAGIC = b"LZK\x01"
_LEN = struct.Struct("<I")
_MAX_HEADER = 1 << 20


@dataclasses.dataclass(frozen=True)
class Entry:
    """A compiled binary and what is known about it."""

    code: bytes
    meta: dict[str, Any]

    @property
    def compile_seconds(self) -> float:
        return float(self.meta.get("compile_seconds", 0.0))


def encode(code: bytes, meta: dict[str, Any]) -> bytes:
    if not isinstance(code, (bytes, bytearray, memoryview)):
        raise TypeError(f"a cache value must be bytes, got {type(code).__name__}")
    code = bytes(code)
    header = dict(meta, sha256=hashlib.sha256(code).hexdigest(), size=len(code))
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return MAGIC + _LEN.pack(len(raw)) + raw + code


def decode(blob: bytes) -> Entry:
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise EntryError(f"stored value is a {type(blob).__name__}, not bytes")
    blob = bytes(blob)
    if blob[:4] != MAGIC or len(blob) < 8:
        raise EntryError("stored value does not start with the lazykern entry header")
    (n,) = _LEN.unpack_from(blob, 4)
    if n > _MAX_HEADER or 8 + n > len(blob):
        raise EntryError("entry header length is out of range (truncated entry?)")
    try:
        meta = json.loads(blob[8 : 8 + n])
    except ValueError as exc:
        raise EntryError(f"entry header is not JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise EntryError("entry header is not a JSON object")
    code = blob[8 + n :]
    if meta.get("size") != len(code) or meta.get("sha256") != hashlib.sha256(code).hexdigest():
        raise EntryError("binary does not match the digest stored with it (corrupt entry)")
    return Entry(code, meta)

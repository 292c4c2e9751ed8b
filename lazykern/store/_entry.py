"""How a cache value is encoded: raw bytes with a small, strictly checked JSON header, never pickle.

Layout: ``MAGIC`` | header length (u32) | code length (u64) | sha256 | JSON header | code.
The sha256 covers the two lengths, the header and the code, so no byte of an
entry can change unnoticed. The header is parsed with a strict schema (types,
sizes, string lengths, nesting depth, finite numbers): anything else is an
:class:`EntryError`, which the store treats as a corrupt entry, never as a crash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import struct
from typing import IO, Any

from ..errors import EntryError as EntryError  # re-exported: callers catch _entry's errors by this name
from ..errors import StaleEntry as StaleEntry

MAGIC = b"LZK\x02"
_PREFIX = struct.Struct("<4sIQ32s")  # magic, header length, code length, sha256
PREFIX_SIZE = _PREFIX.size
# The limits refuse hostile bytes on disk, not legitimate kernels. Sized from real use: the header
# manifest of a kernel including CUB (421 headers) is ~100 KB; 1,100 options or a -D value of
# 100 KB are a few hundred KB. Strings and collections are bounded by the header size alone (parsing
# 16 MiB of JSON costs ~0.1 s: no amplification); nesting is bounded because json recurses.
# An entry over them is served from memory with one warning (KernelCache.store), never lost.
MAX_HEADER = 16 << 20
MAX_CODE = 1 << 30
_MAX_DEPTH = 16
_MAX_STR = MAX_HEADER
_MAX_ITEMS = MAX_HEADER
_INT_BOUND = 1 << 63

# Fields whose type lazykern relies on; any other field must just be plain, bounded JSON.
_STR_FIELDS = ("key", "family", "kernel", "symbol", "arch", "target", "route", "toolchain", "nvrtc", "kind", "name")
_NUMBER_FIELDS = ("created", "compile_seconds")
_STR_LIST_FIELDS = ("options", "signature")


@dataclasses.dataclass(frozen=True)
class Entry:
    """A compiled binary and what is known about it."""

    code: bytes
    meta: dict[str, Any]

    @property
    def compile_seconds(self) -> float:
        return float(self.meta.get("compile_seconds", 0.0))


def encode(code: bytes, meta: dict[str, Any]) -> bytes:
    """One entry's bytes; raises EntryError when ``meta`` would not pass :func:`decode`'s schema."""
    if not isinstance(code, (bytes, bytearray, memoryview)):
        raise TypeError(f"a cache value must be bytes, got {type(code).__name__}")
    code = bytes(code)
    header = {k: v for k, v in meta.items() if k not in ("sha256", "size")}
    check_header(header)
    try:
        raw = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise EntryError(f"entry header is not plain JSON: {exc}") from None
    if len(raw) > MAX_HEADER or len(code) > MAX_CODE:
        raise EntryError(f"entry too large (header {len(raw)} bytes, code {len(code)} bytes)")
    digest = _digest(len(raw), len(code), raw, code)
    return _PREFIX.pack(MAGIC, len(raw), len(code), digest) + raw + code


def _digest(n_header: int, n_code: int, raw: bytes, code: bytes | memoryview) -> bytes:
    h = hashlib.sha256(struct.pack("<IQ", n_header, n_code))
    h.update(raw)
    h.update(code)
    return h.digest()


def declared_size(prefix: bytes) -> int:
    """Total entry size a prefix declares; EntryError when it is not an entry prefix of this version."""
    if len(prefix) < PREFIX_SIZE or prefix[:3] != MAGIC[:3]:
        raise EntryError("stored value does not start with the lazykern entry header")
    magic: bytes
    n_header: int
    n_code: int
    magic, n_header, n_code, _ = _PREFIX.unpack_from(prefix)
    if magic != MAGIC:
        raise StaleEntry(f"entry format {magic[3]} (this lazykern writes {MAGIC[3]}): stale entry", magic[3])
    if n_header > MAX_HEADER or n_code > MAX_CODE:
        raise EntryError(f"entry declares {n_header} header + {n_code} code bytes, over the limits")
    return PREFIX_SIZE + n_header + n_code


def read_bounded(fh: IO[bytes]) -> bytearray:
    """Read one entry from ``fh`` into one buffer, never more bytes than its prefix declares."""
    prefix = fh.read(PREFIX_SIZE)
    data = bytearray(declared_size(prefix))
    data[:PREFIX_SIZE] = prefix
    if readinto_exactly(fh, memoryview(data)[PREFIX_SIZE:]) != len(data) - PREFIX_SIZE:
        raise EntryError(f"entry is shorter than the {len(data)} bytes it declares (truncated entry?)")
    if fh.read(1):
        raise EntryError(f"entry is longer than the {len(data)} bytes it declares")
    return data


def readinto_exactly(fh: IO[bytes], view: memoryview) -> int:
    """Fill ``view`` from ``fh`` in pieces of at most 1 MiB; returns how many bytes arrived."""
    done = 0
    while done < len(view):
        # typing.IO declares no readinto; every binary file lazykern passes (open(.., 'rb'), tar members) has it.
        n = fh.readinto(view[done : done + (1 << 20)])  # type: ignore[attr-defined]
        if not n:
            break
        done += n
    return done


def decode(blob: Any) -> Entry:
    """The entry in ``blob``; EntryError (StaleEntry for another version) for anything else."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise EntryError(f"stored value is a {type(blob).__name__}, not bytes")
    view = memoryview(blob)
    total = declared_size(bytes(view[:PREFIX_SIZE]))
    if total != len(view):
        raise EntryError(f"entry is {len(view)} bytes, its header declares {total} (truncated entry?)")
    _, n_header, n_code, digest = _PREFIX.unpack_from(view)
    raw = bytes(view[PREFIX_SIZE : PREFIX_SIZE + n_header])
    code = view[PREFIX_SIZE + n_header :]
    if _digest(n_header, n_code, raw, code) != digest:
        raise EntryError("entry does not match the digest stored with it (corrupt entry)")
    meta = parse_header(raw)
    return Entry(bytes(code), meta)


def parse_header(raw: bytes) -> dict[str, Any]:
    """The header dict, after the strict schema check."""
    if too_deep(raw, _MAX_DEPTH):
        raise EntryError(f"entry header nests deeper than {_MAX_DEPTH} levels")
    try:
        # json.loads(raw, parse_constant=...) to the letter, without building a decoder per entry.
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        meta: dict[str, Any] = _DECODER.decode(text)  # check_header checks it is one
    except (ValueError, RecursionError) as exc:
        raise EntryError(f"entry header is not JSON: {exc}") from None
    check_header(meta)
    return meta


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in an entry header")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(raw: bytes, limit: int) -> bool:
    """True when a JSON text nests brackets deeper than ``limit`` (brackets in strings count: cheap, safe)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    for byte in raw.translate(None, _NOT_BRACKETS):  # the brackets alone: a header manifest is 100s of KB
        if byte in b"[{":
            depth += 1
            if depth > limit:
                return True
        elif byte in b"]}":
            depth -= 1
    return False


def check_header(meta: Any) -> None:
    """Raise EntryError unless ``meta`` is a header lazykern can rely on."""
    if not isinstance(meta, dict):
        raise EntryError("entry header is not a JSON object")
    _check_json(meta, 0)
    for field in _STR_FIELDS:
        if field in meta and not isinstance(meta[field], str):
            raise EntryError(f"entry header field {field!r} must be a string, got {type(meta[field]).__name__}")
    for field in _NUMBER_FIELDS:
        value = meta.get(field, 0.0)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1e12:
            raise EntryError(f"entry header field {field!r} must be a number >= 0, got {value!r}")
    for field in _STR_LIST_FIELDS:
        value = meta.get(field, [])
        if not isinstance(value, list) or not _all_str(value):
            raise EntryError(f"entry header field {field!r} must be a list of strings")
    schema = meta.get("schema", 0)
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise EntryError(f"entry header field 'schema' must be an integer, got {schema!r}")


def _all_str(values: list[Any]) -> bool:
    for v in values:
        if not isinstance(v, str):
            return False
    return True


def _check_json(value: Any, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise EntryError(f"entry header nests deeper than {_MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int)):
        if isinstance(value, int) and abs(value) >= 1 << 63:
            raise EntryError("entry header holds an integer beyond 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EntryError("entry header holds a non-finite number")
        return
    if isinstance(value, str):
        if len(value) > _MAX_STR:
            raise EntryError(f"entry header holds a string of {len(value)} characters (limit {_MAX_STR})")
        return
    if isinstance(value, (list, tuple)):
        items: Any = value
    elif isinstance(value, dict):
        for k in value:  # a loop, not all(...): no generator per object on every lookup
            if not isinstance(k, str) or len(k) > 128:
                raise EntryError("entry header keys must be short strings")
        items = value.values()
    else:
        raise EntryError(f"entry header holds a {type(value).__name__}")
    if len(value) > _MAX_ITEMS:
        raise EntryError(f"entry header holds a collection of {len(value)} items (limit {_MAX_ITEMS})")
    for item in items:
        # What decoded JSON is made of, accepted here without a call (a warm lookup checks every header
        # it serves); anything else, and anything refused, goes through the full check and its message.
        kind = type(item)
        if depth < _MAX_DEPTH and (
            (kind is str and len(item) <= _MAX_STR)
            or (kind is int and -_INT_BOUND < item < _INT_BOUND)
            or (kind is float and math.isfinite(item))
            or item is None
            or kind is bool
            or ((kind is list or kind is dict) and not item)
        ):
            continue
        _check_json(item, depth + 1)

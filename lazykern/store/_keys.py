"""What makes two compiles the same: the store's key (one place defines it, as cuda.core's ``_keys``)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence

SCHEMA_VERSION = 2  # 2: one digest over header and code, strict header schema
_RECORD = json.JSONEncoder(sort_keys=True)  # json.dumps(record, sort_keys=True), without an encoder per key


def make_key(
    source: str,
    *,
    arch: str,
    options: Sequence[str] = (),
    target: str = "cubin",
    route: str = "nvrtc",
    extra: str = "",
    toolchain: str | None = None,
) -> str:
    """sha256 over every input that decides the binary, and nothing derived from the output.

    Options are hashed in their order; the NVRTC/CCCL versions and lazykern's
    schema version are part of the key, so an upgrade never returns an old entry.
    ``toolchain`` is :func:`lazykern.compiler.toolchain_fingerprint` (computed if
    not given; :meth:`KernelCache.toolchain` memoizes it per store and environment), and so are the
    toolkit's header directories. Headers are not read here: the entry records those NVRTC read, and every
    load verifies them (``lazykern.compile._manifest``), so computing a key opens no file.
    """
    from ..compile.compiler import system_include_dirs, toolchain_fingerprint

    if not isinstance(source, str):
        raise TypeError(f"source must be str, got {type(source).__name__}")
    for field, value in (("arch", arch), ("target", target), ("route", route), ("extra", extra)):
        if not isinstance(value, str):
            raise TypeError(f"{field} must be str, got {type(value).__name__} ({value!r})")
    if isinstance(options, (str, bytes)):
        raise TypeError(f"options must be a sequence of strings, got one {type(options).__name__}: wrap it in a list")
    record = {
        "schema": SCHEMA_VERSION,
        "source": hashlib.sha256(source.encode()).hexdigest(),
        "arch": arch,
        "options": list(options),
        "target": target,
        "route": route,
        "toolchain": toolchain or toolchain_fingerprint(),
        # Where NVRTC finds toolkit headers: another environment's (a second venv, another CUDA
        # wheel) is another search, though the headers read here may still sit unchanged.
        "include_dirs": list(system_include_dirs()),
        "extra": extra,
    }
    if any(str(o).split("=", 1)[0] in _LINE_INFO for o in options):
        # NVRTC writes the working directory into a -G or -lineinfo cubin's line table (DW_AT_comp_dir), and
        # reads relative -I paths from it: another directory is another binary
        record["cwd"] = _cwd()
    return hashlib.sha256(_RECORD.encode(record).encode()).hexdigest()


_LINE_INFO = frozenset({"-G", "--device-debug", "-lineinfo", "--generate-line-info"})


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the directory was removed under the process: no entry of another one serves it
        return f"<no working directory, pid {os.getpid()}>"


def norm_key(key: bytes | str) -> str:
    if isinstance(key, bytes):
        return key.hex()
    if isinstance(key, str):
        return key
    raise TypeError(f"cache keys must be bytes or str, got {type(key).__name__}")

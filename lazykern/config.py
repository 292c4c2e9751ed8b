"""Settings read from the environment, each in one small function.

``LAZYKERN_CACHE_DIR``   cache directory (default: the user cache dir /lazykern)
``LAZYKERN_CACHE_SIZE``  size limit, e.g. ``2G``, ``500M`` or bytes (default 2 GiB)
``LAZYKERN_CACHE``       ``0``/``off``/``false`` keeps compiled code in memory only
``LAZYKERN_ARCH``        arch to compile for when no GPU is present (default sm_90)
``LAZYKERN_LOG``         log level of the ``lazykern`` logger (e.g. ``DEBUG``)
``LAZYKERN_LOCK_TIMEOUT`` seconds to wait for another process's compile lock (default 10)
"""

from __future__ import annotations

import os
import re

import platformdirs

DEFAULT_SIZE = 2 << 30
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def default_cache_dir() -> str:
    env = os.environ.get("LAZYKERN_CACHE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(platformdirs.user_cache_dir(), "lazykern")


def parse_size(text: str | int) -> int:
    """``"500M"`` -> 524288000; ``"2G"``, ``"2GiB"``, ``1024`` work too."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", str(text).upper())
    if not m:
        raise ValueError(f"size must look like 500M, 2G or a byte count, got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def cache_size_limit() -> int:
    env = os.environ.get("LAZYKERN_CACHE_SIZE")
    if not env:
        return DEFAULT_SIZE
    try:
        return parse_size(env)
    except ValueError as exc:
        raise ValueError(f"LAZYKERN_CACHE_SIZE: {exc}") from None


def disk_cache_enabled() -> bool:
    return os.environ.get("LAZYKERN_CACHE", "1").strip().lower() not in ("0", "off", "false", "no")


DEFAULT_LOCK_TIMEOUT = 10.0


def lock_timeout() -> float:
    """Seconds a process waits for another's compile lock before compiling without it."""
    env = os.environ.get("LAZYKERN_LOCK_TIMEOUT", "").strip()
    if not env:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(env)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        import logging

        logging.getLogger("lazykern").warning(
            "LAZYKERN_LOCK_TIMEOUT must be seconds between 0 and 3600, got %r; using %s", env, DEFAULT_LOCK_TIMEOUT
        )
        return DEFAULT_LOCK_TIMEOUT
    return value

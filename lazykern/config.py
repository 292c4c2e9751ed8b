"""Settings read from the environment, each in one small function.

``LAZYKERN_CACHE_DIR``   cache directory (default: the user cache dir /lazykern)
``LAZYKERN_CACHE_SIZE``  size limit, e.g. ``2G``, ``500M`` or bytes (default 2 GiB, at most 1 EiB)
``LAZYKERN_CACHE``       ``0``/``off``/``false``/``no`` keeps compiled code in memory only
``LAZYKERN_ARCH``        arch to compile for when no GPU is present (default sm_90)
``LAZYKERN_LOG``         log level of the ``lazykern`` logger (e.g. ``DEBUG``); shown on stderr
``LAZYKERN_LOCK_TIMEOUT`` seconds to wait for another process's compile lock (default 10)
``LAZYKERN_PYTEST``      ``0``/``off``/``false``/``no`` turns the pytest plugin off
``LAZYKERN_SHARED_CACHE`` ``1``/``on``: use a cache directory another user owns or others may write
                         to (a team cache); without it such a directory is refused (memory only)
``LAZYKERN_STORE_TIMEOUT`` seconds one store operation waits for SQLite's write lock (default 5)
``LAZYKERN_PROGRESS_INTERVAL`` seconds between plain progress lines when stderr is not a terminal (default 10)
``LAZYKERN_EXIT_TEARDOWN`` ``0``/``off``: at exit, leave lazykern's graphs, modules and pools to
                         Numba's finalizers and the driver (default on: released first, in order)
``LAZYKERN_SPREAD``      how ``devices=`` runs the groups on other devices than the caller's: ``processes``
                         (a worker process per device; default for GPU operands) or ``threads`` (this
                         process, a thread per device; default for NumPy operands)

A value that cannot be used never raises: it gives one ``LazykernWarning`` per
variable and process, in the one wording every rejected setting or argument
has (:func:`invalid_value`: the setting, the bad value, what is accepted), and
the default is used instead. :func:`check_settings` reads them all at once.
"""

from __future__ import annotations

import decimal
import logging
import os
import re
from typing import NamedTuple

from .errors import LazykernWarning, warn_user

DEFAULT_SIZE = 2 << 30
MAX_SIZE = 1 << 60  # far beyond any disk, and within SQLite's 64-bit integers
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
_SIZE_RE = re.compile(r"\s*(\d{1,30}(?:\.\d{1,30})?)\s*([KMGTPE]?)(?:I?B)?\s*")
_ON = ("1", "on", "true", "yes")
_OFF = ("0", "off", "false", "no")
_ARCH_RE = re.compile(r"^(?:(?:sm_|compute_)\d{2,3}[af]?|\d{2,3})$")
_warned: set[str] = set()
SIZE_ACCEPTED = "a size such as 500M, 2G or a byte count, from 0 to 1E"


def invalid_value(name: str, value: object, accepted: str) -> str:
    """The one wording of a rejected setting or argument: which one, the bad value, what is accepted.

    >>> invalid_value("LAZYKERN_LOG", "LOUD", "DEBUG, INFO")
    "LAZYKERN_LOG='LOUD' is not valid; accepted: DEBUG, INFO"
    """
    shown = value[:80] if isinstance(value, str) else value
    return f"{name}={shown!r} is not valid; accepted: {accepted}"


def _fall_back(var: str, value: str, accepted: str, default: str) -> None:
    """One warning per variable and process, at the user's line; the caller then uses the default."""
    if var in _warned:
        return
    _warned.add(var)
    warn_user(f"{invalid_value(var, value, accepted)}; using {default}", LazykernWarning)


def default_cache_dir() -> str:
    env = os.environ.get("LAZYKERN_CACHE_DIR", "")
    if env.strip() and "\0" not in env:
        return os.path.abspath(os.path.expanduser(env))
    fallback = _user_cache_dir()
    if env.strip():
        _fall_back("LAZYKERN_CACHE_DIR", env, "a directory path (without NUL bytes)", fallback)
    return fallback


def _user_cache_dir() -> str:
    """``<user cache dir>/lazykern``; platformdirs is imported only when no directory is set (startup time)."""
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir(), "lazykern")


def parse_size(text: str | int) -> int:
    """``"500M"`` -> 524288000; ``"2G"``, ``"2GiB"``, ``1024`` work too.

    Raises ValueError for anything else, including negative sizes and sizes over 1 EiB.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ValueError(f"size must look like 500M, 2G or a byte count, got {text!r}")
    if isinstance(text, int):
        size = text
    else:
        m = _SIZE_RE.fullmatch(text.upper())
        if not m:
            raise ValueError(f"size must look like 500M, 2G or a byte count, got {text[:80]!r}")
        size = int(decimal.Decimal(m.group(1)) * _UNITS[m.group(2)])  # exact, never a float overflow
    if not 0 <= size <= MAX_SIZE:
        raise ValueError(f"size must be between 0 and 1E (1 EiB), got {text!r}")
    return size


def cache_size_limit() -> int:
    env = os.environ.get("LAZYKERN_CACHE_SIZE", "")
    if not env.strip():
        return DEFAULT_SIZE
    try:
        return parse_size(env)
    except ValueError:
        _fall_back("LAZYKERN_CACHE_SIZE", env, SIZE_ACCEPTED, "2G")
        return DEFAULT_SIZE


def _switch(var: str, default: str = "on") -> bool:
    """An on/off variable (unset: on); an unusable value warns and means ``default``."""
    env = os.environ.get(var, "")
    value = env.strip().lower()
    if not value or value in _ON:
        return True
    if value in _OFF:
        return False
    _fall_back(var, env, "1, on, true, yes or 0, off, false, no", default)
    return default == "on"


def disk_cache_enabled() -> bool:
    return _switch("LAZYKERN_CACHE")


def exit_teardown_enabled() -> bool:
    """``LAZYKERN_EXIT_TEARDOWN``: False leaves what lazykern owns to Numba and the driver at exit
    (:mod:`lazykern._exit`); the switch exists to compare exits with and without it."""
    return _switch("LAZYKERN_EXIT_TEARDOWN")


SPREAD_MODES = ("processes", "threads")


def spread_mode() -> str | None:
    """``LAZYKERN_SPREAD``: "processes" or "threads" for every ``devices=`` spread; None (unset) leaves it
    to the operands (processes for GPU arrays, threads for NumPy's); an unusable value warns and means None."""
    env = os.environ.get("LAZYKERN_SPREAD", "")
    value = env.strip().lower()
    if not value:
        return None
    if value in SPREAD_MODES:
        return value
    _fall_back("LAZYKERN_SPREAD", env, ", ".join(SPREAD_MODES), "the operands' default")
    return None


def pytest_plugin_enabled() -> bool:
    """``LAZYKERN_PYTEST``: False turns lazykern's pytest plugin off."""
    return _switch("LAZYKERN_PYTEST")


def shared_cache_allowed() -> bool:
    """``LAZYKERN_SHARED_CACHE``: whether a directory others can write to may hold the store (default off).

    Whoever can write there can replace any kernel this process loads and runs.
    """
    if not os.environ.get("LAZYKERN_SHARED_CACHE", "").strip():
        return False
    return _switch("LAZYKERN_SHARED_CACHE", default="off")


def arch_override() -> str | None:
    """``LAZYKERN_ARCH`` if it names an arch (``sm_90``, ``90``, ``compute_90a``), else None."""
    env = os.environ.get("LAZYKERN_ARCH", "")
    if not env.strip():
        return None
    if not _ARCH_RE.match(env.strip().lower()):
        _fall_back("LAZYKERN_ARCH", env, "an arch such as sm_80, sm_90 or 90", "the device's arch (sm_90 without one)")
        return None
    return env.strip()


def log_level(*, report: bool = True) -> int | None:
    """``LAZYKERN_LOG`` as a logging level (``DEBUG``, ``info``, ``10``), or None when unset or unusable.

    ``report=False``: an unusable value is not warned about yet (see :func:`configure_logging`).
    """
    env = os.environ.get("LAZYKERN_LOG", "")
    value = env.strip().upper()
    if not value:
        return None
    if value.isascii() and value.isdigit() and len(value) <= 3:  # not '²': a digit int() rejects
        return int(value)
    level = logging.getLevelName(value)  # the number for a known name, a string otherwise
    if isinstance(level, int):
        return level
    if report:
        _fall_back("LAZYKERN_LOG", env, "DEBUG, INFO, WARNING, ERROR, CRITICAL or a number", "no log output")
    return None


_ENV_HANDLER = "lazykern LAZYKERN_LOG"  # the name of the stderr handler LAZYKERN_LOG adds (added once)


def configure_logging() -> None:
    """The ``lazykern`` logger: silent by default, shown on stderr at ``LAZYKERN_LOG``'s level.

    Runs at ``import lazykern``, before the ``lazykern`` command can show warnings its way, so an
    unusable value is reported later, with the other settings (:func:`check_settings`).
    """
    logger = logging.getLogger("lazykern")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    level = log_level(report=False)
    if level is None:
        return
    logger.setLevel(level)
    if not any(h.name == _ENV_HANDLER for h in logger.handlers):
        handler = logging.StreamHandler()  # stderr
        handler.setFormatter(logging.Formatter("lazykern %(levelname)s: %(message)s"))
        handler.name = _ENV_HANDLER
        logger.addHandler(handler)


DEFAULT_LOCK_TIMEOUT = 10.0


def lock_timeout() -> float:
    """Seconds a process waits for another's compile lock before compiling without it (0 to 3600)."""
    return _seconds("LAZYKERN_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT, 0, 3600)


DEFAULT_STORE_TIMEOUT = 5.0


def store_timeout() -> float:
    """Seconds one store operation waits for another process's write lock on the database (0.01 to 600).

    Past it the operation gives up: a lookup counts as a miss (the kernel is compiled and
    served from memory), a write is skipped; the store is tried again a minute later.
    """
    return _seconds("LAZYKERN_STORE_TIMEOUT", DEFAULT_STORE_TIMEOUT, 0.01, 600)


DEFAULT_PROGRESS_INTERVAL = 10.0


def progress_interval() -> float:
    """Seconds between the plain progress lines long commands print when stderr is not a terminal (0.01 to 3600)."""
    return _seconds("LAZYKERN_PROGRESS_INTERVAL", DEFAULT_PROGRESS_INTERVAL, 0.01, 3600)


def _seconds(var: str, default: float, low: float, high: float) -> float:
    env = os.environ.get(var, "")
    if not env.strip():
        return default
    try:
        value = float(env)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # also NaN
        _fall_back(var, env, f"seconds from {low:g} to {high:g}", f"{default:g}")
        return default
    return value


class Settings(NamedTuple):
    """The store's settings as :func:`check_settings` read them (``cache_dir`` None: not set)."""

    cache_dir: str | None
    cache_size: int
    cache_enabled: bool
    lock_timeout: float


def check_settings() -> Settings:
    """Read every ``LAZYKERN_*`` setting once: each unusable value gives its one warning now.

    The ``lazykern`` command calls it before any work; in a program, the first use of a public
    name of ``lazykern`` and opening the default cache do: a mistyped value is reported even
    where nothing reads it yet. Returns the store's settings, so that the default cache opens
    with what was just read and checked instead of reading the environment again.
    """
    cache_dir = default_cache_dir() if os.environ.get("LAZYKERN_CACHE_DIR", "").strip() else None
    cache_size = cache_size_limit()
    cache_enabled = disk_cache_enabled()
    arch_override()
    log_level()
    settings = Settings(cache_dir, cache_size, cache_enabled, lock_timeout())
    pytest_plugin_enabled()
    shared_cache_allowed()
    store_timeout()
    progress_interval()
    exit_teardown_enabled()
    spread_mode()
    return settings


def cores() -> int:
    """The CPU cores this process may run on (a container's or taskset's limit, not the host's count)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)

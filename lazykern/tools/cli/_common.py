"""What every command shares: the consoles, error handling, progress, formatting.

Every piece of text that comes from outside (compiler logs, paths, kernel
names, user input, exception messages) reaches Rich through :func:`plain` or
:func:`esc`, never as markup: ``a[i]`` must print as ``a[i]``.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperGroup

from ...config import check_settings, invalid_value
from ...errors import LazykernError
from ._progress import PlainProgress
from ._signals import exit_status, signal_name, stop_on_signals

if TYPE_CHECKING:
    from rich.progress import Progress

    from ...store.cache import KernelCache

# Recent typer versions vendor click (typer._click): take click's base classes from typer itself.
_CLICK_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_PASS_THROUGH = (_CLICK_ERROR, typer.Exit, typer.Abort)

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def esc(value: Any) -> str:
    """``str(value)`` made safe to put inside a markup string."""
    return escape(str(value))


def plain(value: Any, style: str = "") -> Text:
    """A table cell or line that is shown exactly as written (no markup)."""
    return Text(str(value), style=style)


def debug_requested(ctx: Any = None) -> bool:
    """``--debug`` on the command line, or ``LAZYKERN_LOG=DEBUG`` in the environment."""
    root = ctx.find_root() if ctx is not None else None
    if root is not None and root.params.get("debug"):
        return True
    return os.environ.get("LAZYKERN_LOG", "").strip().upper() == "DEBUG"


def error_line(message: Any) -> None:
    err_console.print(Text.assemble(("error: ", "bold red"), str(message)), soft_wrap=True)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    err_console.print(Text.assemble(("warning: ", "bold yellow"), str(message)), soft_wrap=True)


class LazykernGroup(TyperGroup):
    """The root command: one place that turns every failure into one line.

    A :class:`LazykernError` prints its message and exits 1; usage errors keep
    click's exit status 2; Ctrl-C and SIGTERM exit 130 and 143 (:mod:`._signals`);
    anything unexpected prints a short message and a hint (the full traceback
    with ``--debug`` or ``LAZYKERN_LOG=DEBUG``). Python
    warnings are shown as one styled line instead of a source echo.
    """

    def invoke(self, ctx: Any) -> Any:
        with warnings.catch_warnings(), stop_on_signals():
            warnings.showwarning = _show_warning
            check_settings()  # every mistyped LAZYKERN_* variable: one warning line each, before any work
            try:
                return super().invoke(ctx)
            except _PASS_THROUGH:
                raise
            except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (stop_on_signals): cleanup has run
                error_line(f"interrupted by {signal_name(exc)}")
                raise typer.Exit(exit_status(exc)) from None
            except LazykernError as exc:
                if debug_requested(ctx):
                    _print_traceback()
                error_line(exc)
                raise typer.Exit(1) from None
            except Exception as exc:
                if debug_requested(ctx):
                    _print_traceback()
                    error_line(f"unexpected {type(exc).__name__}: {exc}")
                else:
                    error_line(
                        f"unexpected {type(exc).__name__}: {_first_line(exc)} "
                        "(run again with --debug for the full traceback, and please report it)"
                    )
                raise typer.Exit(1) from None


def _print_traceback() -> None:
    err_console.print(plain(traceback.format_exc().rstrip(), "dim"), soft_wrap=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


@contextmanager
def progress(*, bar: bool = True, counts: bool = False) -> Iterator[Progress | PlainProgress]:
    """Progress on stderr: on a terminal, a transient display (gone when the work ends or fails,
    so no spinner frame is left above a result or an error); elsewhere (a pipe, a CI log) plain
    lines at a steady pace (:mod:`._progress`)."""
    if not err_console.is_terminal:
        from ... import config

        with PlainProgress(err_console, config.progress_interval(), counts=counts) as lines:
            yield lines
        return
    from rich.progress import (  # import on first use: startup time
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if bar:
        columns.append(BarColumn())
    if counts:
        columns.append(MofNCompleteColumn())
    columns.append(TimeElapsedColumn())
    if bar:
        columns += [TextColumn("ETA"), TimeRemainingColumn()]
    with Progress(*columns, console=err_console, transient=True) as shown:
        yield shown


def open_cache() -> KernelCache:
    from ...store.cache import default_cache

    return default_cache()


def open_existing_cache() -> KernelCache:
    """The cache a command that looks or trims (info, ls, clear, prune, export) works on; it creates nothing.

    Raises :class:`CacheError` when the cache directory holds no store (a mistyped
    ``--cache-dir`` must not leave a new empty store behind). A directory that
    cannot be looked into is opened as usual: the cache says why it is unusable.
    """
    cache = open_cache_if_any()
    if cache is None:
        from ...config import default_cache_dir
        from ...errors import CacheError

        raise CacheError(
            f"no lazykern cache at {default_cache_dir()!r}: nothing was created there. Check --cache-dir or "
            "LAZYKERN_CACHE_DIR; a cache is made when a kernel is first compiled, by `lazykern warm` "
            "or by `lazykern cache import`."
        )
    return cache


def open_cache_if_any() -> KernelCache | None:
    """The cache for a command that only looks (info, ls), or None where no store is made yet: the directory
    is missing or empty (a fresh machine; nothing is created). A directory that holds something else than a
    store raises :class:`CacheError` (a mistyped ``--cache-dir``), saying what it holds."""
    from ...config import default_cache_dir, disk_cache_enabled
    from ...errors import CacheError
    from ...store._store_ro import holds_store

    directory = default_cache_dir()
    if not disk_cache_enabled() or holds_store(directory) is not False:
        return open_cache()
    try:
        held = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        held = []
    except OSError:
        return open_cache()  # cannot be looked into: the cache says why it is unusable
    if os.path.isfile(directory):
        what = "a file, not a directory"
    elif held:
        names = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        what = f"a directory of {len(held)} other {'entry' if len(held) == 1 else 'entries'} ({names})"
    else:
        return None
    raise CacheError(
        f"no lazykern cache at {directory!r}: it is {what}; nothing was created there. Check --cache-dir or "
        "LAZYKERN_CACHE_DIR; a cache is made when a kernel is first compiled, by `lazykern warm` or by "
        "`lazykern cache import`."
    )


def listed(values: Sequence[str] | None, option: str, accepted: str) -> list[str]:
    """Comma-separated or repeated option values, split and stripped.

    A value that names nothing (``-k ''``, ``--arch ,``) is a usage error: left to mean
    "not given", it would silently run the default (``warm -k ''`` warming the core set).
    """
    out: list[str] = []
    for item in values or []:
        names = [v.strip() for v in item.split(",") if v.strip()]
        if not names:
            raise typer.BadParameter(invalid_value(option, item, accepted))
        out += names
    return out


def count(n: int, one: str, many: str | None = None) -> str:
    """``count(1, "kernel")`` -> ``"1 kernel"``, ``count(2, "entry", "entries")`` -> ``"2 entries"``."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def when(ts: Any) -> str:
    if not isinstance(ts, (int, float)) or ts <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str, option: str = "--older-than") -> float:
    """``"30d"`` -> seconds. The unit is required: a bare ``30`` could mean seconds or days.

    >>> parse_duration("90m")
    5400.0
    """
    m = _DURATION.match(text.lower())
    if not m:
        accepted = "a number with a unit: s, m, h, d or w (e.g. 30d, 12h, 90m)"
        raise typer.BadParameter(invalid_value(option, text, accepted))
    return float(m.group(1)) * _SECONDS[m.group(2)]


def print_json(data: Any) -> None:
    console.print_json(json.dumps(data, default=str))

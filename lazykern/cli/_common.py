"""What every command shares: the console, error handling, formatting."""

from __future__ import annotations

import datetime
import functools
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from ..errors import LazykernError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """Turn lazykern's own errors into one red line and exit status 1 (2 stays for usage)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (LazykernError, ValueError, LookupError, OSError, ImportError) as exc:
            err_console.print(f"[bold red]error:[/] {exc}")
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def open_cache():
    from ..cache import default_cache

    return default_cache()


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


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``"30d"`` -> seconds; units s, m, h, d, w."""
    m = _DURATION.match(text.lower())
    if not m:
        raise typer.BadParameter(f"duration must look like 30d, 12h or 90m, got {text!r}")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def split_list(values: list[str] | None) -> list[str]:
    """``["sm_80,sm_90", "sm_100"]`` -> ``["sm_80", "sm_90", "sm_100"]``."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def print_json(data: Any) -> None:
    console.print_json(json.dumps(data, default=str))

"""Progress of a long benchmark: a live spinner on a terminal, plain lines at a steady pace elsewhere.

A benchmark runs for seconds to minutes. On a terminal a transient Rich spinner
shows the current step. In a CI log, a notebook's subprocess or a pipe there is
no terminal to redraw, so each step is one plain line on stderr as it starts,
and a step that runs longer than ``pace`` seconds gets a "still running" line
every ``pace`` seconds: the log never goes quiet for long.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

DEFAULT_PACE = 10.0


@contextmanager
def steps(console: Console, *, pace: float = DEFAULT_PACE) -> Iterator[Callable[[str], None]]:
    """Yield ``report(message)``: call it as each step starts.

    ``console`` is where progress goes (stderr); its ``is_terminal`` picks the display.
    """
    if console.is_terminal:
        with _spinner(console) as report:
            yield report
    else:
        with _plain_lines(console, pace) as report:
            yield report


@contextmanager
def _spinner(console: Console) -> Iterator[Callable[[str], None]]:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn  # on first use: startup time

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as shown:
        task = shown.add_task("starting", total=None)
        # Escaped: a step names kernels and paths (a[i], [red]) that must show as written, not as markup.
        yield lambda message: shown.update(task, description=escape(message))


@contextmanager
def _plain_lines(console: Console, pace: float) -> Iterator[Callable[[str], None]]:
    start = time.monotonic()
    current: dict[str, Any] = {"message": "starting", "since": start}
    lock = threading.Lock()
    done = threading.Event()

    def line(text: str) -> None:
        console.print(Text(f"[{time.monotonic() - start:6.1f} s] {text}"), soft_wrap=True, highlight=False)

    def report(message: str) -> None:
        with lock:
            current["message"], current["since"] = message, time.monotonic()
            line(message)

    def heartbeat() -> None:
        while not done.wait(pace):
            with lock:
                running = time.monotonic() - current["since"]
                if running >= pace:
                    line(f"still running: {current['message']} ({running:.0f} s so far)")

    ticker = threading.Thread(target=heartbeat, name="lazykern-bench-progress", daemon=True)
    ticker.start()
    try:
        yield report
    finally:
        done.set()
        ticker.join()
    line("done")  # not reached on failure: the command's error line says what stopped it

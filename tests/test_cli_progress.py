"""lazykern.tools.cli._progress: plain progress lines at a steady pace when stderr is not a terminal."""

from __future__ import annotations

import io
import threading
import time

from rich.console import Console

from lazykern.tools.cli._progress import PlainProgress


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, force_terminal=False, highlight=False), out


def test_a_step_is_announced_then_repeated_at_a_steady_pace_and_the_ticker_stops():
    console, out = _console()
    with PlainProgress(console, 0.05, counts=True) as shown:
        task = shown.add_task("checking", total=None)
        assert out.getvalue() == ""  # nothing for work that may end at once
        shown.update(task, total=4, description="compiling 4 kernels [bold]x[/bold]")
        assert out.getvalue().startswith("lazykern: compiling 4 kernels x [0/4]")  # a step starts: said now
        shown.update(task, advance=3)
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and "[3/4]" in lines[-1], lines
    assert all(line.startswith("lazykern: ") and line.endswith(" s") for line in lines)
    assert not any(t.name == "lazykern-progress" for t in threading.enumerate())
    settled = out.getvalue()
    time.sleep(0.15)
    assert out.getvalue() == settled  # nothing printed after the work ended


def test_a_short_piece_of_work_prints_nothing():
    console, out = _console()
    with PlainProgress(console, 10.0) as shown:
        shown.update(shown.add_task("starting", total=None), description="done")
    assert out.getvalue() == ""


def test_the_command_helper_picks_plain_lines_off_a_terminal(monkeypatch):
    from lazykern.tools.cli import _common

    console, out = _console()
    monkeypatch.setattr(_common, "err_console", console)
    monkeypatch.setenv("LAZYKERN_PROGRESS_INTERVAL", "0.05")
    with _common.progress(counts=True) as shown:
        assert isinstance(shown, PlainProgress) and shown.interval == 0.05
        shown.update(shown.add_task("x"), total=2, advance=1)
    assert "[1/2]" in out.getvalue()

"""`lazykern bench ... --quick` is quick, and long benchmarks show progress where stderr is no terminal."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from lazykern.tools.bench._progress import steps
from tests._cli_run import env_for, lazykern

LINE = re.compile(r"^\[\s*\d+\.\d s\] ")


def test_bench_startup_quick_is_quick_and_says_what_it_runs(tmp_path):
    started = time.perf_counter()
    done = lazykern("bench", "startup", "--quick", env=env_for(tmp_path / "cache"), timeout=120)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    # A liveness bound, not a speed target (those live in benchmarks/): under 10 s on an idle machine,
    # 36 s on a CI host shared with another test run; a quick run that compiled all 50 would take minutes.
    assert seconds < 100, f"took {seconds:.1f} s: did --quick compile every fragment?"
    assert re.search(r"eager: \d+ of \d+ fragments", done.stdout)  # a sample, and it says so
    assert "all 50 at this rate" in " ".join(done.stdout.split())
    progress = [ln for ln in done.stderr.splitlines() if LINE.match(ln)]  # stderr is a pipe here: plain lines
    assert any("start-up: compile or load" in ln for ln in progress) and progress[-1].endswith("] done"), done.stderr
    assert "\x1b[" not in done.stderr  # no terminal control codes in a log


def _plain_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=200), out


def test_plain_lines_at_a_steady_pace_off_a_terminal():
    console, out = _plain_console()
    with steps(console, pace=0.05) as report:
        report("first [bold]step[/bold]")
        time.sleep(0.3)
        report("second step")
    lines = out.getvalue().splitlines()
    assert all(LINE.match(ln) for ln in lines), lines
    assert lines[0].endswith("first [bold]step[/bold]")  # shown as written, never as markup
    still = [ln for ln in lines if "still running: first [bold]step[/bold]" in ln]
    assert len(still) >= 2  # the slow step was not silent
    assert not any("still running: second" in ln for ln in lines) and lines[-1].endswith("] done")


def test_a_failure_stops_the_heartbeat_without_a_done_line():
    console, out = _plain_console()
    try:
        with steps(console, pace=0.02) as report:
            report("step")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    text = out.getvalue()
    time.sleep(0.1)
    assert out.getvalue() == text and "done" not in text  # the ticker thread has ended


def test_a_terminal_gets_the_live_display_not_lines():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with steps(console, pace=0.01) as report:
        report("compiling")
        time.sleep(0.05)
    assert not any(LINE.match(ln) for ln in out.getvalue().splitlines())

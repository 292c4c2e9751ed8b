"""A pytest plugin that widens the file clock's tick (``lazykern.compile._manifest._tick_ns``) to 7 ms.

A compile does not persist an entry that read a file changed within one tick of its start (4 ms here:
``time.clock_getres(CLOCK_REALTIME_COARSE)``); tests step past it with 12 ms sleeps or
:func:`tests._file_clock.settled`. A test that compiles right after touching a file it reads (a
fixture's ``mkdir``) passes or fails by a few milliseconds of scheduling; this plugin widens the
window. Session 59's CI failure (tests/test_manifest.py's old fixture) failed 4 of that file's 37
tests in one serial run with it and 2 without, none under xdist (a worker's first compile starts late
enough to hide the race). Run it serially:

    python -m pytest -p tests._wide_tick tests/test_manifest.py
"""

from __future__ import annotations

from lazykern.compile import _manifest

WIDE_TICK_NS = 7_000_000


def pytest_configure(config) -> None:  # noqa: ARG001 - pytest's hook signature
    _manifest._tick_ns = lambda: WIDE_TICK_NS

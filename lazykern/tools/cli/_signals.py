"""Ctrl-C and SIGTERM stop every command the same way: cleanup runs, the exit status says which.

Python turns SIGINT into ``KeyboardInterrupt``; SIGTERM would end the process on the spot,
leaving worker processes and half-drawn displays behind. While a command runs, SIGTERM raises
:class:`Terminated`, a ``KeyboardInterrupt``, so every ``finally`` and ``except KeyboardInterrupt``
that cleans up after Ctrl-C cleans up after SIGTERM too. The command then exits with the shell's
convention, 128 + the signal number: 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while a command ran."""


def exit_status(exc: KeyboardInterrupt) -> int:
    """128 + the number of the signal that raised ``exc``."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def signal_name(exc: KeyboardInterrupt) -> str:
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT (Ctrl-C)"


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (in the main thread; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

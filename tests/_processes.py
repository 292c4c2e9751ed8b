"""Helpers for tests of processes: whether a process has ended."""

from __future__ import annotations

import time


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether ``pid`` has ended (or is a zombie nobody reaps: ended too) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False

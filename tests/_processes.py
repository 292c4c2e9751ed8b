"""Helpers for tests of processes: whether a process has ended, a process's children (read from /proc).

Other processes start and end while /proc is read: an entry listed may be gone when it is opened."""

from __future__ import annotations

import os
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


def parent(pid: int | str) -> int | None:
    """The parent of ``pid``, None once it has ended (or when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):  # ended meanwhile
        return None


def children(pid: int | None = None) -> set[int]:
    """The live child processes of ``pid`` (default: this process)."""
    me = os.getpid() if pid is None else pid
    return {int(p) for p in os.listdir("/proc") if p.isdigit() and parent(p) == me}

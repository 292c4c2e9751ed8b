"""Task functions for tests/test_procpool.py: spawned workers import them by name."""

from __future__ import annotations

import os
import signal
import time


def square(x: int) -> int:
    return x * x


def die_on(x: int, bad: int) -> int:
    if x == bad:
        os.kill(os.getpid(), signal.SIGKILL)  # a worker killed mid-task (out of memory, kill -9)
    return x


def hang_on(x: int, bad: int) -> int:
    if x == bad:
        time.sleep(3600)  # a hung compiler
    return x


def fail_on(x: int, bad: int) -> int:
    if x == bad:
        raise ValueError(f"bad input {x}")
    return x


def pid(_: int) -> int:
    time.sleep(0.2)
    return os.getpid()

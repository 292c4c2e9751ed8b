"""Run a scenario as a real subprocess, watch its output, signal it, and see what it left behind."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))


def env(cache_dir: str, **extra: str) -> dict[str, str]:
    """The scenario's environment: this checkout first on the path, its own cache directory."""
    out = dict(os.environ)
    out.update(
        PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p),
        LAZYKERN_CACHE_DIR=cache_dir,
        LAZYKERN_PROGRESS_INTERVAL="0.2",
        NUMBA_ENABLE_CUDASIM="0",
    )
    out.update(extra)
    return out


def _sigint_as_from_a_terminal() -> None:
    """In the child before exec. A job a non-interactive shell started in the background (a CI runner, `cmd &`)
    inherits SIGINT ignored, Python keeps an inherited ignore, and a Ctrl-C test would then test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Scenario:
    """``python args...`` with stderr (and stdout) read line by line on a thread, under a hard timeout."""

    def __init__(self, args: Sequence[str], environ: dict[str, str], hard_timeout: float = 120.0) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_sigint_as_from_a_terminal,
        )
        self.hard_timeout = hard_timeout
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, test: Callable[[str], bool], timeout: float = 60.0) -> str:
        """The first output line for which ``test`` holds; fails if the process ends or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise AssertionError(f"no expected line within {timeout} s; output so far:\n{self.output}") from None
            if line is None:
                raise AssertionError(f"the process ended before the expected line; output:\n{self.output}")
            self.lines.append(line)
            if test(line):
                return line

    def finish(self) -> tuple[int, float]:
        """(exit code, seconds from now until it exited); kills it and fails past the hard timeout."""
        start = time.monotonic()
        try:
            code = self.proc.wait(timeout=max(1.0, self.hard_timeout - (start - self.started)))
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"hung: still running after {self.hard_timeout} s; output:\n{self.output}") from None
        elapsed = time.monotonic() - start
        while True:
            line = self._queue.get(timeout=10)
            if line is None:
                break
            self.lines.append(line)
        return code, elapsed

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (Linux /proc)."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    return out


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (an exited process waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def still_running(pids: Sequence[int], grace: float = 3.0) -> list[int]:
    """The pids still running after ``grace`` seconds (polled)."""
    deadline = time.monotonic() + grace
    while True:
        alive = [p for p in pids if running(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""

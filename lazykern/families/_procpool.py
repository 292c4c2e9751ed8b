"""Worker processes that end with their work: :func:`run` maps a function over tasks in ``jobs`` processes.

Each spawned worker holds one task at a time, handed over its own pipe, so the parent always
knows which task a worker has: a worker that dies (killed, out of memory) or overruns
``task_timeout`` fails only that task and is replaced. Leaving the iteration in any way (done,
an exception, Ctrl-C, a SIGTERM turned into an exception, the generator closed) terminates every
worker and waits at most about a second before killing what is left, so nothing outlives the
call; a parent killed outright leaves workers that exit at their next read (the pipe is closed).

``concurrent.futures.ProcessPoolExecutor`` is not used: on Ctrl-C its shutdown waits for every
queued task and Python 3.11 offers no way to terminate its workers, which is how
``lazykern warm -j N`` once ignored Ctrl-C.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from typing import Any

_GRACE = 1.0  # seconds a terminated worker gets before SIGKILL


@dataclasses.dataclass
class Outcome:
    """One task's end: ``value`` when ``ok``, else ``error`` says what went wrong."""

    task: tuple[Any, ...]
    ok: bool
    value: Any = None
    error: str = ""


def run(
    fn: Callable[..., Any],
    tasks: Sequence[tuple[Any, ...]],
    jobs: int,
    *,
    task_timeout: float | None = None,
) -> Generator[Outcome, None, None]:
    """``fn(*task)`` for every task, in up to ``jobs`` spawned processes, yielded as each ends.

    ``fn`` must be importable by name (a module-level function): workers are started with
    ``spawn``, because forking a process that has touched CUDA is unsafe.
    """
    import multiprocessing  # import on first use: startup time
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    owner = os.getpid()
    pending = deque(tasks)
    busy: dict[Any, _Worker] = {}  # parent end of the pipe -> worker holding a task
    idle: list[_Worker] = []  # told there is no more work: exiting

    def hand_out(worker: _Worker) -> None:
        if pending:
            worker.give(pending.popleft())
            busy[worker.conn] = worker
        else:
            worker.give(None)
            idle.append(worker)

    def start() -> None:
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(fn, there), daemon=True, name="lazykern-worker")
        proc.start()
        there.close()  # the worker's end lives in the worker only: its death reads as EOF here
        hand_out(_Worker(proc, here))

    def retire(worker: _Worker, error: str) -> Outcome:
        del busy[worker.conn]
        _stop([worker])
        if pending:
            start()
        return Outcome(worker.task or (), False, error=error)

    try:
        for _ in range(min(jobs, len(pending))):
            start()
        while busy:
            ready: list[Any] = wait(list(busy), timeout=_next_deadline(busy.values(), task_timeout))
            for conn in ready:
                worker = busy[conn]
                try:
                    ok, value = conn.recv()
                except (EOFError, OSError):
                    yield retire(worker, worker.death())
                    continue
                task = worker.task or ()
                del busy[conn]
                hand_out(worker)
                yield Outcome(task, True, value) if ok else Outcome(task, False, error=value)
            for worker in _overdue(busy.values(), task_timeout):
                yield retire(worker, f"timed out after {task_timeout:g} s (its worker was stopped)")
    finally:
        if os.getpid() == owner:  # a forked child finalizing its copy of this generator must not stop our workers
            _stop([*busy.values(), *idle])


@dataclasses.dataclass
class _Worker:
    proc: Any
    conn: Any
    task: tuple[Any, ...] | None = None
    since: float = 0.0

    def death(self) -> str:
        self.proc.join(_GRACE)
        code = self.proc.exitcode
        if code is not None and code < 0:
            try:
                return f"worker process died ({signal.Signals(-code).name})"
            except ValueError:
                pass
        return f"worker process died (exit code {code})"

    def give(self, task: tuple[Any, ...] | None) -> None:
        """Hand over a task (None: no more work, the worker exits)."""
        self.task, self.since = task, time.monotonic()
        with contextlib.suppress(OSError):  # a dead worker: its EOF is read next
            self.conn.send(task)


def _next_deadline(workers: Any, task_timeout: float | None) -> float | None:
    if task_timeout is None:
        return None
    starts = [w.since for w in workers]
    return max(0.0, min(starts) + task_timeout - time.monotonic()) if starts else None


def _overdue(workers: Any, task_timeout: float | None) -> list[_Worker]:
    if task_timeout is None:
        return []
    now = time.monotonic()
    return [w for w in workers if now - w.since > task_timeout]


def _stop(workers: list[_Worker]) -> None:
    """Terminate the workers still running, then kill those that ignore it; close every pipe.

    Ctrl-C and SIGTERM wait until this is done (a second Ctrl-C must not leave workers behind).
    """
    masked = threading.current_thread() is threading.main_thread()
    if masked:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        for w in workers:
            if w.proc.is_alive():
                w.proc.terminate()
        deadline = time.monotonic() + _GRACE
        for w in workers:
            w.proc.join(max(0.0, deadline - time.monotonic()))
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join()
            w.conn.close()
            w.proc.close()
    finally:
        if masked:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _serve(fn: Callable[..., Any], conn: Any) -> None:
    """A worker's loop: a task in, ``(ok, value_or_error)`` out, until ``None`` or the parent is gone."""
    # Ctrl-C reaches the whole process group: the parent decides when work stops, and terminates us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        try:
            reply: tuple[bool, Any] = (True, fn(*task))
        except Exception as exc:  # one failing task must not end the others
            reply = (False, f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return

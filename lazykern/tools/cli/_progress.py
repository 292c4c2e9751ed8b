"""Progress of long work: Rich's live display on a terminal, plain lines at a steady pace elsewhere.

A CI log or a notebook's subprocess has no terminal: a live display would write nothing (or
escape codes), and minutes of silence look like a hang. There, :class:`PlainProgress` prints one
line when a step of known size starts and then one every ``LAZYKERN_PROGRESS_INTERVAL`` seconds
(default 10), from a daemon thread that the ``with`` block stops and joins; work that ends
quickly prints nothing but its result.

Commands and benchmarks use :func:`lazykern.cli._common.progress`, which picks one of the two;
both take ``add_task(description, total=...)`` and ``update(task, ...)``, the part of
``rich.progress.Progress`` lazykern uses.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rich.progress import TaskID


@dataclasses.dataclass
class _Task:
    description: str
    total: float | None
    completed: float = 0.0


class PlainProgress:
    """Plain progress lines on ``console``: ``lazykern: <step> [3/40] 12 s``, at most one per ``interval``.

    ``description`` is Rich markup (what the live display takes); it is printed as its plain text.
    """

    def __init__(self, console: Console, interval: float, *, counts: bool = True) -> None:
        self.console = console
        self.interval = interval
        self.counts = counts
        self._tasks: dict[int, _Task] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._tick, name="lazykern-progress", daemon=True)

    def __enter__(self) -> PlainProgress:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, typ: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def add_task(self, description: str, total: float | None = None, **_: Any) -> TaskID:
        with self._lock:
            task_id = len(self._tasks)
            self._tasks[task_id] = _Task(description, total)
        return cast("TaskID", task_id)  # rich's NewType of int, imported for typing only (startup time)

    def update(
        self,
        task_id: TaskID,
        *,
        total: float | None = None,
        completed: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        **_: Any,
    ) -> None:
        with self._lock:
            task = self._tasks[task_id]
            new_step = bool(total) and total != task.total
            if total is not None:
                task.total = total
            if completed is not None:
                task.completed = completed
            if advance is not None:
                task.completed += advance
            if description is not None:
                task.description = description
        if new_step:  # a step starts (its size is known): say so now, not at the next tick
            self._say(task_id)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            for task_id in list(self._tasks):
                self._say(task_id)

    def _say(self, task_id: int) -> None:
        with self._lock:
            task = dataclasses.replace(self._tasks[task_id])
        line = f"lazykern: {Text.from_markup(task.description).plain}"
        if self.counts and task.total is not None:
            line += f" [{task.completed:g}/{task.total:g}]"
        line += f" {time.monotonic() - self._start:.0f} s"
        self.console.print(Text(line), soft_wrap=True)

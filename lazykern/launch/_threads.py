"""One thread per piece of work, all at once: the devices' groups, passes and shares.

A thread pool reuses a worker that has gone idle, so with it two groups could run one after the other on
one thread (a fast first group ends before the second is submitted). Each call here gets a thread of its
own, every thread is joined before anything is raised (no thread outlives the call), and the first
failure, in call order, is raised."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def run_each(calls: Sequence[Callable[[], T]], name: str) -> list[T]:
    """Each of ``calls`` on a thread of its own (named ``name-i``); their results in call order."""
    results: list[T | None] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def one(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as e:  # noqa: BLE001 -- re-raised on the caller's thread below
            errors[i] = e

    threads = [threading.Thread(target=one, args=(i,), name=f"{name}-{i}", daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results  # type: ignore[return-value]  # every call returned: no None is left

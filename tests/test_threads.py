"""launch._threads.run_each: a thread of each call's own, all joined before a failure is raised."""

from __future__ import annotations

import threading
import time

import pytest

from lazykern.launch._threads import run_each


def test_each_call_gets_its_own_thread_even_when_the_first_ends_at_once():
    seen: list[threading.Thread] = []  # the Thread objects stay alive here: their ids are not reused
    for _ in range(50):
        seen.clear()
        out = run_each([lambda i=i: (seen.append(threading.current_thread()), i)[1] for i in range(3)], "t")
        assert out == [0, 1, 2]
        assert len({id(t) for t in seen}) == 3 and threading.current_thread() not in seen
        assert sorted(t.name for t in seen) == ["t-0", "t-1", "t-2"]


def test_every_call_ends_before_the_first_failure_is_raised():
    ended: list[int] = []

    def slow() -> int:
        time.sleep(0.2)
        ended.append(1)
        return 1

    def fails(msg: str) -> int:
        raise ValueError(msg)

    with pytest.raises(ValueError, match="first"):
        run_each([lambda: fails("first"), slow, lambda: fails("second")], "t")
    assert ended == [1]
    assert not [t for t in threading.enumerate() if t.name.startswith("t-")]


def test_no_calls_no_threads():
    assert run_each([], "t") == []

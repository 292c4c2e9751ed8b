"""A process forked while another thread compiles finishes its own work (multiprocessing's "fork").

Two ways a fork inherits a compile in progress: lazykern's per-kernel locks held by the
compiling thread (reset in the child by lazykern._fork), and NVRTC's own native locks, which
nothing can reset (the child compiles in a fresh process instead).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable

import pytest

from lazykern import _fork

from ._proc import Scenario, env


@pytest.mark.parametrize("mode", ["same", "nvrtc"])
def test_a_child_forked_mid_compile_finishes(tmp_path, mode):
    run = Scenario(["tests/liveness/_fork_user.py", mode], env(str(tmp_path)), hard_timeout=90)
    code, _ = run.finish()
    assert code == 0, run.output
    result = json.loads(next(line for line in run.lines if line.startswith("{")))
    assert result["exit"] == 0 and not result["hung"], run.output
    assert result["kernel"] == ("add_0" if mode == "same" else "add_1")
    assert result["seconds"] < 30, result


def test_forked_children_get_every_lazykern_lock_unlocked():
    held = [_fork.lock(), _fork.rlock()]
    for lock in held:
        lock.acquire()
    seen = threading.Event()
    _fork.on_child(seen.set)
    try:
        # the child: nothing held, the resets ran
        assert _in_child(lambda: all(lock.acquire(timeout=1) for lock in held) and seen.is_set())
    finally:
        _fork._resets.remove(seen.set)
        for lock in held:
            lock.release()


def test_numba_compiler_lock_held_by_another_thread_is_free_in_the_child():
    from numba.cuda.core.compiler_lock import global_compiler_lock

    import lazykern._numba.compile  # noqa: F401  (registers the reset)

    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with global_compiler_lock:  # a @lazy_kernel compiling on another thread
            holding.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait()
    try:
        parts = (global_compiler_lock._cuda_lock._lock, global_compiler_lock._numba_lock._lock)
        assert _in_child(lambda: all(part.acquire(timeout=2) for part in parts))
    finally:
        release.set()
        holder.join()


def _in_child(check: Callable[[], bool]) -> bool:
    """``check()`` run in a child forked from this process (threads holding locks here), its answer."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = bool(check())
        finally:
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    return answer == b"1"

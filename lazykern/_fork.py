"""Fork safety: a child process starts with no lazykern lock held and no parent handle in use.

``fork()`` copies a process with only the thread that called it: a lock another thread held at
that moment (a compile in progress, a store write) stays held in the child forever, and the
child blocks on the first kernel it asks for. multiprocessing's default start method on Linux
and Dask's fork workers do exactly this. Every lock lazykern creates comes from :func:`lock` or
:func:`rlock`, which remember it (weakly); ``os.register_at_fork`` re-initializes them all in the
child, then runs what modules registered with :func:`on_child` (forgetting device memory pools,
CUDA streams and the like, which belong to the parent's context).

Native code keeps locks of its own that nothing can reset: a child forked while a parent thread
was inside NVRTC deadlocks in its first NVRTC call. Functions marked :func:`native` count the
threads inside them; in a child forked while that count was not zero they run in a fresh
(spawned) process instead, for the rest of the child's life.

The store's SQLite connections are not reused: diskcache notices the new pid and reconnects.
A file lock the parent holds stays the parent's: the child waits for it like any other process
(bounded by ``LAZYKERN_LOCK_TIMEOUT``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

_locks: weakref.WeakSet[Any] = weakref.WeakSet()
_resets: list[Callable[[], None]] = []
_P = ParamSpec("_P")
_R = TypeVar("_R")
_inside_native = 0  # threads of this process inside a @native function now
_native_tainted = False  # forked while some thread was inside one: its native locks may be held forever


def lock() -> threading.Lock:
    """A ``threading.Lock`` that a forked child gets back unlocked."""
    new = threading.Lock()
    _locks.add(new)
    return new


def rlock() -> threading.RLock:
    """A ``threading.RLock`` that a forked child gets back unlocked."""
    new = threading.RLock()
    _locks.add(new)
    return new


def on_child(reset: Callable[[], None]) -> Callable[[], None]:
    """Run ``reset()`` in every forked child, after the locks are reset (usable as a decorator)."""
    _resets.append(reset)
    return reset


def native(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Mark ``fn`` as running native code with locks of its own (NVRTC); see the module's docstring.

    ``fn`` must be importable by name, and its arguments and result picklable.
    """

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if _native_tainted:
            return _in_fresh_process(fn, args, kwargs)
        with inside_native():
            return fn(*args, **kwargs)

    return run


def tainted() -> bool:
    """Whether this process was forked while a thread was inside native code: then native calls
    whose results cannot be pickled must take a :func:`native` function's route instead."""
    return _native_tainted


@contextlib.contextmanager
def inside_native() -> Iterator[None]:
    """Count the calling thread as inside native code for the block (what :func:`native` does)."""
    global _inside_native
    with _native_count:
        _inside_native += 1
    try:
        yield
    finally:
        with _native_count:
            _inside_native -= 1


def _in_fresh_process(fn: Callable[..., _R], args: tuple[Any, ...], kwargs: dict[str, Any]) -> _R:
    """``fn(*args, **kwargs)`` in a new interpreter (a plain subprocess: unlike multiprocessing's
    spawn it does not re-run the user's ``__main__``); its exception is raised here."""
    import pickle  # import on first use: only a tainted child comes here
    import subprocess
    import sys

    # By name: the fresh process imports the module and calls the function as defined there.
    payload = pickle.dumps((sys.path, fn.__module__, fn.__qualname__, args, kwargs))
    done = subprocess.run(
        [sys.executable, "-c", "from lazykern._fork import _serve_one; _serve_one()"],
        input=payload,
        capture_output=True,
        timeout=_FRESH_TIMEOUT,
        check=False,
    )
    if done.returncode != 0 or not done.stdout:
        raise RuntimeError(
            f"{getattr(fn, '__qualname__', fn)} in a fresh process failed (exit code {done.returncode}): "
            + done.stderr.decode(errors="replace")[-2000:]
        )
    ok, value = pickle.loads(done.stdout)
    if not ok:
        raise value
    result: _R = value  # what fn returned there, unpickled
    return result


def _serve_one() -> None:
    """The fresh process of :func:`_in_fresh_process`: a pickled call on stdin, its outcome on stdout."""
    import importlib
    import pickle
    import sys

    path, module, qualname, args, kwargs = pickle.loads(sys.stdin.buffer.read())
    sys.path[:] = path
    fn: Any = importlib.import_module(module)
    for part in qualname.split("."):
        fn = getattr(fn, part)
    try:
        outcome: tuple[bool, Any] = (True, fn(*args, **kwargs))
    except Exception as exc:
        outcome = (False, exc)
    sys.stdout.buffer.write(pickle.dumps(outcome))


_FRESH_TIMEOUT = 900.0  # seconds: a hung compiler in the fresh process is stopped, not waited for forever
_native_count = lock()


def _after_fork_in_child() -> None:
    global _inside_native, _native_tainted
    # The threads that held these are gone: whatever they guarded is not in progress here.
    # (_at_fork_reinit is what CPython's own threading and logging use for the same purpose.)
    for held in list(_locks):
        held._at_fork_reinit()
    for reset in _resets:
        reset()
    _native_tainted = _native_tainted or _inside_native > 0
    _inside_native = 0


os.register_at_fork(after_in_child=_after_fork_in_child)

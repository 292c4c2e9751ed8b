"""Worker processes, one per device, that this process owns: a spread's groups on other GPUs.

One interpreter driving several GPUs takes turns on the GIL: a contraction's host work (hundreds of
small launches a pass) on one device waits for the other's. So the groups of a spread that run on
another device than the caller's run in a process of their own (``_proc_worker.py``), one per device,
which sees that GPU alone (``CUDA_VISIBLE_DEVICES``) and answers calls ``module:function(*args)``
with their result or their exception.

Owned, never orphaned:

* started with ``subprocess`` (fork + exec: a fresh interpreter, never a fork of this threaded
  process, and never a re-import of the caller's ``__main__`` as multiprocessing's spawn does), in a
  session of its own (a Ctrl-C reaches this process, which ends the workers it waits for);
* from one long-lived launcher thread: ``PR_SET_PDEATHSIG`` (set by the worker) kills a child when the
  *thread* that started it ends, so a worker started from a short-lived thread would die with it;
* a worker ends when its stdin closes (this process exited or ended it), is killed by the kernel when
  this process dies (``PR_SET_PDEATHSIG``), and exits at once if its parent was gone before that was set;
* no worker outlives the call that started it: every public call that may spread (:func:`scoped`:
  ``contract_network``, ``network_argmax``, ``count_network``, ``solve``, the spin-glass solvers) is a
  scope, the passes and contractions inside it share the workers, and when the last scope of the
  process ends its workers are ended (about 1.8 s to start one again). ``keep_warm()`` (public as
  :func:`lazykern.tn.keep_workers`) keeps them between calls for as long as it is open: a later call
  pays no interpreter start, imports, CUDA context or kernel loads. A worker whose call failed in
  transport (it died, or the call was interrupted) is killed with its process group, never reused; at
  exit every worker is ended.

The channel is each worker's stdin / stdout, length-prefixed pickles between this process and its own
child (no third party writes them); the worker's stray prints go to its stderr, a file read back for
the error when it dies.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, TypeVar

from .. import _children, _fork
from ..errors import LazykernError, RemoteTraceback, WorkerError

log = logging.getLogger("lazykern")

_HEADER = struct.Struct("<Q")
_CLOSE_S = 3.0  # an idle worker told to stop (stdin closed) gets this long to exit before it is killed
_BOOT = "import sys; sys.path.pop(0); from lazykern.tn._proc_worker import main; sys.exit(main())"


def send(stream: IO[bytes], item: Any) -> None:
    """Write one framed pickle."""
    data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """Read one framed pickle; EOFError when the other end closed before a whole one came."""
    head = _read(stream, _HEADER.size)
    return pickle.loads(_read(stream, _HEADER.unpack(head)[0]))


def _read(stream: IO[bytes], n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError(f"the pipe closed {n - left} bytes into a {n}-byte frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def encode_error(exc: BaseException) -> tuple[Any, ...]:
    """A worker's exception as it crosses the pipe: itself where it pickles, else its type's path and message;
    with the formatted traceback either way."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        data = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(data)  # an exception whose __init__ wants more than its args fails only here
        return ("pickled", data, tb)
    except Exception:  # noqa: BLE001 (any failure means: send its type and message instead)
        return ("named", type(exc).__module__, type(exc).__qualname__, str(exc), tb)


def decode_error(item: tuple[Any, ...], where: str) -> BaseException:
    """The exception :func:`encode_error` sent, of the same type where it can be rebuilt, its worker
    traceback chained as ``__cause__``."""
    tb = item[-1]
    exc: BaseException | None = None
    if item[0] == "pickled":
        try:
            exc = pickle.loads(item[1])
        except Exception:  # noqa: BLE001
            exc = None
    else:
        _, module, qualname, message, _ = item
        exc = _rebuild(module, qualname, message)
    if exc is None:
        exc = LazykernError(f"{where} raised an exception this process cannot rebuild:\n{tb}")
    exc.__cause__ = RemoteTraceback(f"in {where}:\n{tb}")
    return exc


def _rebuild(module: str, qualname: str, message: str) -> BaseException | None:
    try:
        cls: Any = sys.modules.get(module) or __import__(module, fromlist=["_"])
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            made: BaseException = cls(message)
            return made
    except Exception:  # noqa: BLE001 (a type that cannot be made from its message: a LazykernError instead)
        return None
    return None


class Worker:
    """One worker process for one device; :meth:`call` sends, :meth:`result` waits for the answer."""

    def __init__(self, device: int, visible: str | None) -> None:
        self.device = device
        self.errors = tempfile.TemporaryFile(prefix="lazykern-worker-")  # a file: a chatty child never blocks
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        env["LAZYKERN_WORKER_PARENT"] = str(os.getpid())
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            env=env,
            close_fds=True,
            start_new_session=True,  # its own process group: ended with whatever it started
        )
        self.calls = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def call(self, module: str, function: str, *args: Any) -> None:
        """Send ``module.function(*args)``; the answer is read by :meth:`result`."""
        assert self.proc.stdin is not None
        try:
            send(self.proc.stdin, (module, function, args))
        except (OSError, ValueError) as exc:
            raise self._died(f"could not be sent the call ({exc})") from None
        self.calls += 1

    def result(self) -> Any:
        """The call's return value; its exception (same type, the worker's traceback as the cause); or
        :class:`WorkerError` when the worker died first."""
        assert self.proc.stdout is not None
        try:
            status, value = receive(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            raise self._died(f"ended before it answered ({exc})") from None
        if status == "ok":
            return value
        raise decode_error(value, f"the worker process for device {self.device} (pid {self.pid})")

    def _died(self, what: str) -> WorkerError:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        code = self.proc.returncode
        how = f"exit status {code}" if code is None or code >= 0 else f"signal {-code}"
        tail = _tail(self.errors)
        kill(self)
        return WorkerError(
            f"the worker process for device {self.device} (pid {self.pid}) {what}: {how}"
            + (f"; its last output: {tail}" if tail else "")
        )

    def close(self, grace: float = 0.0) -> None:
        """End it: stdin closed (an idle worker exits by itself within ``grace``), then its group killed."""
        _children.ask_to_exit(self.proc, grace)
        kill(self)


def kill(worker: Worker) -> None:
    """SIGKILL the worker's process group and reap the worker; close its pipes (idempotent)."""
    try:
        os.killpg(worker.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is empty: everything ended
        pass
    try:
        worker.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # a process that ignores SIGKILL is stuck in the kernel
        log.warning("spread: worker %d did not end after SIGKILL", worker.proc.pid)
    for stream in (worker.proc.stdin, worker.proc.stdout, worker.errors):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    with _cond:
        _live.discard(worker)


def _tail(stream: IO[bytes]) -> str:
    try:
        stream.seek(0)
        text = stream.read().decode(errors="replace")
    except (OSError, ValueError):
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-600:]


def visible_device(device: int) -> str:
    """What ``CUDA_VISIBLE_DEVICES`` names ordinal ``device`` of this process: its own list's entry where
    that variable is set (ordinals count within it), else the ordinal itself."""
    mine = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mine is None or not mine.strip():
        return str(device)
    entries = [e.strip() for e in mine.split(",") if e.strip()]
    return entries[device] if device < len(entries) else str(device)


# -- the pool: an idle worker per device, started by the launcher thread ------------------------
_cond = threading.Condition(_fork.lock())
_live: set[Worker] = set()
_idle: dict[int, Worker] = {}
_closed = False
_launches: queue.Queue[tuple[Callable[[], Worker], queue.Queue[Worker | BaseException]]] = queue.Queue()
_launcher: threading.Thread | None = None
_scopes = 0  # calls in progress (any thread) whose workers are shared until the last one ends
_kept = 0  # keep_warm() blocks open: idle workers stay between calls
F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """One call: the workers it (and every call inside it) starts are ended when the process's last open
    scope ends, unless :func:`keep_warm` is open."""
    global _scopes
    with _cond:
        _scopes += 1
    try:
        yield
    finally:
        with _cond:
            _scopes -= 1
        _end_idle_if_done()


def scoped(fn: F) -> F:
    """``fn`` as a :func:`scope`."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with scope():
            return fn(*args, **kwargs)

    return call  # type: ignore[return-value]  # functools.wraps keeps fn's signature; mypy sees a plain callable


@contextlib.contextmanager
def keep_warm() -> Iterator[None]:
    """Keep the worker processes between calls while this is open (ended when it closes, if no call is
    in progress then): a loop of multi-GPU calls pays their start (about 1.8 s) once."""
    global _kept
    with _cond:
        _kept += 1
    try:
        yield
    finally:
        with _cond:
            _kept -= 1
        _end_idle_if_done()


def _end_idle_if_done() -> None:
    """End the idle workers when no call is in progress and none is to be kept."""
    with _cond:
        if _scopes or _kept or not _idle:
            return
        idle = list(_idle.values())
        _idle.clear()
    for worker in idle:
        if worker.proc.stdin is not None:
            try:
                worker.proc.stdin.close()  # all asked at once; each then gets its grace
            except OSError:
                pass
    for worker in idle:
        worker.close(grace=_CLOSE_S)


def _launch_loop() -> None:
    while True:
        make, answer = _launches.get()
        try:
            answer.put(make())
        except BaseException as exc:  # noqa: BLE001 (handed to the thread that asked)
            answer.put(exc)


def _start(device: int, gpu: bool) -> Worker:
    """A new worker, started by the launcher thread (see the module's docstring)."""
    global _launcher
    with _cond:
        if _closed:
            raise WorkerError("the process is exiting: no worker process starts any more")
        if _launcher is None or not _launcher.is_alive():
            _launcher = threading.Thread(target=_launch_loop, name="lazykern-worker-launcher", daemon=True)
            _launcher.start()
            atexit.register(shutdown, final=True)
    answer: queue.Queue[Worker | BaseException] = queue.Queue()
    _launches.put((lambda: Worker(device, visible_device(device) if gpu else None), answer))
    made = answer.get()
    if isinstance(made, BaseException):
        raise WorkerError(f"no worker process could be started for device {device}: {made}") from made
    with _cond:
        _live.add(made)
    log.debug("spread: started worker %d for device %d", made.pid, device)
    return made


def take(device: int, gpu: bool = True) -> Worker:
    """The idle worker of ``device`` (alive), else a new one. ``gpu``: it sees that GPU alone (False: a
    host worker, for NumPy groups and tests)."""
    with _cond:
        found = _idle.pop(device, None)
    if found is not None and found.proc.poll() is None:
        return found
    if found is not None:
        kill(found)
    return _start(device, gpu)


def give_back(worker: Worker) -> None:
    """``worker`` answered its call: idle again (one per device is kept; another is ended)."""
    with _cond:
        wanted = _scopes > 0 or _kept > 0  # a call in progress may use it again, or it is to be kept
        if not _closed and wanted and worker.device not in _idle and worker.proc.poll() is None:
            _idle[worker.device] = worker
            return
    worker.close(grace=_CLOSE_S)


@scoped
def run(calls: Sequence[tuple[int, str, str, tuple[Any, ...]]], here: Callable[[], Any], gpu: bool = True) -> list[Any]:
    """``here()`` in this process while each ``(device, module, function, args)`` runs in that device's
    worker; the answers in order, ``here()``'s first. Every worker has answered (or died) before an error
    is raised; one that failed in transport, or whose call was interrupted, is killed, never reused. A
    :func:`scope` of its own: outside any other (and :func:`keep_warm`), its workers end with it."""
    workers: list[Worker] = []
    try:
        for device, module, function, args in calls:
            worker = take(device, gpu)
            workers.append(worker)
            worker.call(module, function, *args)
    except BaseException:
        for w in workers:
            kill(w)
        raise
    answers: list[Any] = [None] * (len(calls) + 1)
    failure: BaseException | None = None
    try:
        try:
            answers[0] = here()
        except Exception as exc:  # noqa: BLE001 (raised once every worker has answered)
            failure = exc
        for i, worker in enumerate(workers, 1):
            try:
                answers[i] = worker.result()
            except WorkerError as exc:
                failure = failure or exc
                continue
            except Exception as exc:  # noqa: BLE001 (the worker answered: it stays usable)
                failure = failure or exc
            give_back(worker)
    except BaseException:  # interrupted (Ctrl-C) while a worker computes: it is ended, not left running
        for w in workers:
            if w.proc.poll() is None and w not in _idle.values():
                kill(w)
        raise
    if failure is not None:
        raise failure
    return answers


def workers() -> list[int]:
    """Process ids of this process's workers alive now, idle or busy (tests count them)."""
    with _cond:
        return sorted(w.pid for w in _live if w.proc.poll() is None)


def shutdown(*, final: bool = False) -> None:
    """End every worker now: idle ones are asked first (stdin closed) and get :data:`_CLOSE_S` in all,
    then killed with their groups. At exit (``final``) no worker starts afterwards; tests call it to
    start afresh."""
    global _closed
    with _cond:
        _closed = True
        every = list(_live)
        _idle.clear()
    for worker in every:
        if worker.proc.stdin is not None:
            try:
                worker.proc.stdin.close()
            except OSError:
                pass
    for worker in every:
        worker.close(grace=_CLOSE_S)
    with _cond:
        _closed = final


@_fork.on_child
def _forget_parents_workers() -> None:
    global _launcher
    _live.clear()  # the parent's: a forked child writing to their pipes would corrupt the parent's calls
    _idle.clear()
    _launcher = None

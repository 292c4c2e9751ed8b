"""The observed compile, run where a crash is contained: a bounded pool of compile servers per process.

A traced compile can take NVRTC down (see ``_trace_server``), so it runs in a child process. The
servers are this module's to end: at most :data:`SERVERS` of them (``max(2, CPU count)``), started
when first needed and kept (a cold compile then pays no interpreter start); a request waits for a
free one. :func:`begin` returns at once; the request is sent from a thread of its own, so the
caller's untraced compile (which serves the user) runs meanwhile. :meth:`Pending.wait` collects the
answer within a bound: past it the server is ended (it may be stuck on a FIFO header) and the
kernel stays in memory. A server that dies is replaced and the request tried once more in a fresh
one (a fresh process compiles what an earlier traced compile poisoned). At exit every server is
ended, busy ones included (``_later`` has waited for pending stores first); a forked child starts
its own (the parent's pipes are the parent's), and a server whose parent is gone ends itself.
Servers are started with ``subprocess`` (fork+exec, never a fork that keeps running Python).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any

from .. import _children, _fork

log = logging.getLogger("lazykern")

TIMEOUT_S = 600.0  # the most one observed compile may take: the largest translation units take minutes
MIN_BOUND_S = 60.0  # ... and at least this long, however fast the untraced compile was
SLOWER = 20.0  # an observed compile may take this many times the untraced one before it is ended
SERVERS = max(2, os.cpu_count() or 1)
_CLOSE_S = 1.0  # an idle server told to stop (stdin closed) gets this long before it is killed
_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_trace_server.py")
# sys.path[0] is the working directory under -c: drop it so nothing there shadows cuda.core's imports.
_BOOT = f"import runpy, sys; sys.path.pop(0); runpy.run_path({_SERVER!r}, run_name='__main__')"
# Niced when the caller serves its own compile first, which the user waits for and which must go
# first on a busy machine; not when the observed compile is the one waited for (``warm``): a niced
# process starves there (a loaded 2-core box: 77 s against 25 s for 36 kernels).
_NICE = "import os; os.nice(10); "

_cond = threading.Condition(_fork.lock())
_live: set[_Server] = set()  # every server this process started and has not ended (idle or busy)
_idle: list[_Server] = []
_starting = 0  # servers being started (counted against SERVERS)
_closed = False  # the process is exiting: no server starts any more
_exit_registered = False


def _scratch_base() -> str | None:
    """One directory per user under the temporary directory for the servers' traces, made once: a
    server's own directory appears in it, not in /tmp itself (whose timestamps a header's path
    crosses, and which a compile's record checks)."""
    base = os.path.join(tempfile.gettempdir(), f"lazykern-{os.getuid()}")
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(base)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None  # someone else's, or a link: the server makes its own directory in /tmp
    return base


class _Server:
    def __init__(self, nice: bool = True) -> None:
        # A file, not a pipe: a chatty child never blocks on it, and a crash's last words stay readable.
        base = _scratch_base()
        self.errors = tempfile.TemporaryFile(mode="w+", prefix="lazykern-trace-", dir=base)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", (_NICE if nice else "") + _BOOT, *([base] if base else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
            close_fds=True,
        )

    def send(self, request: dict[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def receive(self, timeout: float) -> dict[str, Any] | str:
        """The answer, or why there is none (the server died, or took longer than ``timeout``: ended)."""
        out = self.proc.stdout
        assert out is not None
        try:
            ready, _, _ = select.select([out], [], [], max(timeout, 0.0))
            line = out.readline() if ready else ""
        except (OSError, ValueError):  # ended by shutdown meanwhile
            ready, line = [out], ""
        if line:
            answer: dict[str, Any] = json.loads(line)
            return answer
        if not ready:
            self.close()
            return f"it did not answer in {timeout:.0f} s"
        try:
            self.proc.wait(timeout=10)  # its stdout closed: it is on its way out
        except subprocess.TimeoutExpired:
            pass
        err = _tail(self.errors)
        self.close()
        code = self.proc.returncode
        signal = f" (signal {-code})" if code is not None and code < 0 else ""
        return f"it exited with status {code}{signal}" + (f": {err}" if err else "")

    def close(self, grace: float = 0.0) -> None:
        """End it: stdin closed (an idle server exits by itself within ``grace``), then killed."""
        _children.ask_to_exit(self.proc, grace)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.errors):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        with _cond:
            _live.discard(self)
            _cond.notify_all()


def _tail(stream: IO[str]) -> str:
    """The last line the server wrote to its stderr file ("LLVM ERROR: out of memory")."""
    try:
        stream.seek(0)
        text = stream.read()
    except (OSError, ValueError):
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


class Pending:
    """An observed compile under way; :meth:`wait` gives NVRTC's answer (output and header events)."""

    def __init__(self, request: dict[str, Any], *, nice: bool = True) -> None:
        self.request, self.nice = request, nice
        self.server: _Server | None = None
        self.ran = False  # a server took the request (False: none could be started, nothing ran)
        self.sent_at = 0.0
        self._why = ""
        self._sent = threading.Event()
        self._result: tuple[dict[str, Any] | None, str] | None = None
        self._lock = _fork.lock()
        threading.Thread(target=self._send, name="lazykern-observe", daemon=True).start()

    def _send(self) -> None:
        try:
            self.server = _take(nice=self.nice)
            if self.server is None:
                self._why = "no compile server could be started" if not _closed else "the process is exiting"
            elif not self.server.send(self.request):
                self.server.close()
                self.server, self._why = None, "the request could not be sent"
            else:
                self.ran = True
            self.sent_at = time.monotonic()
        finally:
            self._sent.set()

    def wait(self, timeout: float = TIMEOUT_S) -> tuple[dict[str, Any] | None, str]:
        """``(answer, "")``, or ``(None, why there is none)``; at most ``timeout`` seconds of the
        server's time (waiting for a free server is not counted: the requests ahead are bounded)."""
        with self._lock:
            if self._result is None:
                self._result = self._wait(min(timeout, TIMEOUT_S))
            return self._result

    def _wait(self, timeout: float) -> tuple[dict[str, Any] | None, str]:
        self._sent.wait()
        why = self._why
        for attempt in range(2):
            server = self.server
            if attempt == 1 or why or server is None:
                if attempt == 1:
                    log.info("the compile server died (%s): trying once more in a fresh one", why)
                # A fresh process: an idle one may be poisoned by an earlier traced compile too.
                server = self.server = _take(fresh=attempt == 1, nice=self.nice)
                if server is None or not server.send(self.request):
                    if server is not None:
                        server.close()
                    why = "no compile server could be started" if not _closed else "the process is exiting"
                    continue
                self.ran = True
                self.sent_at = time.monotonic()
            answer = server.receive(self.sent_at + timeout - time.monotonic())
            if isinstance(answer, str):
                why, self.server = answer, None
                if answer.startswith("it did not answer"):
                    return None, f"the observed compile {answer} (ended)"
                continue
            _give_back(server)
            self.server = None
            if answer.get("ok"):
                return answer, ""
            return None, f"the observed compile failed ({answer.get('error', '?')})"
        return None, f"NVRTC's observed compile crashed ({why})"


def bound(served_seconds: float | None) -> float:
    """How long the observed compile of a unit whose untraced compile took ``served_seconds`` may
    run (the same bytes, traced: past many times that, it is stuck, e.g. on a FIFO header)."""
    if served_seconds is None:
        return TIMEOUT_S
    return min(TIMEOUT_S, max(MIN_BOUND_S, SLOWER * served_seconds))


def begin(
    source: str,
    *,
    name: str,
    arch: str,
    options: dict[str, Any],
    target: str,
    cwd: str,
    cwd_id: tuple[int, int],
    nice: bool = True,
) -> Pending:
    """Start a traced compile of ``source`` (the user's exact bytes) to ``target`` (see the module).

    ``options`` are ``cuda.core.ProgramOptions`` keywords: the NVRTC command line is built here, so the
    server needs NVRTC's binding only, not cuda.core's imports. ``cwd``/``cwd_id``: the working
    directory at the compile's start and its ``(st_dev, st_ino)``; the server refuses another one.
    ``nice``: a server started for it runs niced (see ``_NICE``).
    """
    from cuda.core import ProgramOptions

    # Registered here, in the caller's thread, before the store that waits for this request is
    # (``_later``): atexit runs last-registered first, so pending stores are waited for, then servers end.
    _register_exit()
    flags = ProgramOptions(arch=arch, name=name, **options)
    request = {
        "source": source,
        "name": name,
        "flags": [flag.decode() for flag in flags.as_bytes("nvrtc")],
        "target": target,
        "cwd": cwd,
        "cwd_id": list(cwd_id),
    }
    return Pending(request, nice=nice)


def _take(*, fresh: bool = False, nice: bool = True) -> _Server | None:
    """An idle server (unless ``fresh``), a new one while fewer than :data:`SERVERS` live, else wait
    for one. A ``fresh`` one ends an idle server to make room rather than wait."""
    global _starting
    _register_exit()
    while True:
        victim = None
        with _cond:
            if _closed:
                return None
            while _idle and not fresh:
                server = _idle.pop()
                if server.proc.poll() is None:
                    return server
                _live.discard(server)
            if len(_live) + _starting < SERVERS:
                _starting += 1
                break
            if fresh and _idle:
                victim = _idle.pop()
            else:
                _cond.wait()
        if victim is not None:
            victim.close()
    try:
        new: _Server | None = _Server(nice)
    except OSError as exc:
        log.info("no compile server (%s)", exc)
        new = None
    with _cond:
        _starting -= 1
        if new is not None:
            _live.add(new)
        _cond.notify_all()
    return new


def _register_exit() -> None:
    global _exit_registered
    with _cond:
        if _exit_registered:
            return
        _exit_registered = True
    atexit.register(shutdown, final=True)


def _give_back(server: _Server) -> None:
    with _cond:
        if not _closed and server in _live:
            _idle.append(server)
            _cond.notify_all()
            return
    server.close()


def servers() -> list[int]:
    """Process ids of the servers alive now (tests count them)."""
    with _cond:
        return sorted(s.proc.pid for s in _live if s.proc.poll() is None)


def shutdown(*, final: bool = False) -> None:
    """End every server now, busy ones too (their requests answer "exiting"); idle ones are asked
    first and get :data:`_CLOSE_S` in all. At exit (``final``) no server starts afterwards; tests
    call it to start afresh."""
    global _closed
    with _cond:
        _closed = True
        idle, busy = list(_idle), [s for s in _live if s not in _idle]
        _idle.clear()
        _cond.notify_all()
    for server in busy:
        server.close()
    deadline = time.monotonic() + _CLOSE_S
    for server in idle:
        if server.proc.stdin is not None:
            try:
                server.proc.stdin.close()
            except OSError:
                pass
    for server in idle:
        server.close(grace=max(deadline - time.monotonic(), 0.01))
    with _cond:
        _closed = final


@_fork.on_child
def _forget_parents_servers() -> None:
    global _starting, _exit_registered
    _live.clear()  # the parent's: a child writing to their pipes would corrupt the parent's requests
    _idle.clear()
    _starting = 0
    _exit_registered = False

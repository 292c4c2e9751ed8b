"""NVRTC's header trace, taken where a crash is contained: a small compile server per process.

A traced compile can take NVRTC down (see ``_trace_server``), so it runs in a child process that
this module starts on the first compile and keeps (a cold compile then pays no interpreter start).
:func:`begin` sends the request and returns at once: the traced pass runs while the caller's own
untraced compile (which gives the binary) runs in-process. :meth:`Pending.wait` collects it. A
server that dies is replaced and the request tried once more in the fresh one (a fresh process
compiles what an earlier traced compile poisoned); if that fails too, the answer says why, and the
caller keeps the binary in memory only. Busy servers are not shared: each concurrent compile takes
an idle server or starts one. A forked child starts its own (the parent's pipes are the parent's).
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
import time
from typing import IO, Any

from .. import _fork

log = logging.getLogger("lazykern")

TIMEOUT_S = 600.0  # one traced pass: the largest translation units take minutes
_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_trace_server.py")
# sys.path[0] is the working directory under -c: drop it so nothing there shadows cuda.core's imports.
# Niced: on a busy machine the caller's own compile, which the user waits for, goes first.
_BOOT = f"import os, runpy, sys; sys.path.pop(0); os.nice(10); runpy.run_path({_SERVER!r}, run_name='__main__')"
_MAX_IDLE = 4

_idle: list[_Server] = []
_exit_registered = False
_lock = _fork.lock()


class _Server:
    def __init__(self) -> None:
        # A file, not a pipe: a chatty child never blocks on it, and a crash's last words stay readable.
        self.errors = tempfile.TemporaryFile(mode="w+", prefix="lazykern-trace-")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT],
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
        except OSError:
            return False
        return True

    def receive(self, timeout: float) -> dict[str, Any] | str:
        """The answer, or why there is none (the server died, or took longer than ``timeout``: ended)."""
        out = self.proc.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], timeout)
        line = out.readline() if ready else ""
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
        signal = f" (signal {-code})" if code < 0 else ""
        return f"it exited with status {code}{signal}" + (f": {err}" if err else "")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.errors):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


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
    """A traced pass under way; :meth:`wait` says whether the trace file was written."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.result: str | None = None
        self.server: _Server | None = _take()
        self.sent = self.server is not None and self.server.send(request)

    def wait(self) -> str:
        """Empty when the trace is written; else why not (the caller keeps its binary in memory)."""
        if self.result is None:
            self.result = self._wait()
        return self.result

    def _wait(self) -> str:
        deadline = time.monotonic() + TIMEOUT_S
        why = ""
        for attempt in range(2):
            server = self.server
            if attempt == 1 or not self.sent or server is None:
                if attempt == 1 and server is not None:
                    log.info("the trace server died (%s): trying once more in a fresh one", why)
                server = self.server = _start()
                if server is None or not server.send(self.request):
                    why = "the trace server could not be started"
                    continue
            answer = server.receive(max(deadline - time.monotonic(), 0.0))
            if isinstance(answer, str):
                why, self.server = answer, None
                continue
            _give_back(server)
            self.server = None
            return "" if answer.get("ok") else f"the traced pass failed ({answer.get('error', '?')})"
        return f"NVRTC's traced pass crashed ({why})"


def begin(source: str, *, name: str, arch: str, options: dict[str, Any], trace: str, cwd: str) -> Pending:
    """Start a syntax-only traced compile of ``source`` writing ``trace`` + ".json" (see the module).

    ``options`` are ``cuda.core.ProgramOptions`` keywords: the NVRTC command line is built here, so the
    server needs NVRTC's binding only, not cuda.core's imports.
    """
    from cuda.core import ProgramOptions

    flags = ProgramOptions(arch=arch, name=name, fdevice_syntax_only=True, fdevice_time_trace=trace, **options)
    request = {
        "source": source,
        "name": name,
        "flags": [flag.decode() for flag in flags.as_bytes("nvrtc")],
        "trace": trace,
        "cwd": cwd,
    }
    return Pending(request)


def _start() -> _Server | None:
    global _exit_registered
    if not _exit_registered:
        _exit_registered = True
        atexit.register(shutdown)
    try:
        return _Server()
    except OSError as exc:
        log.info("no trace server (%s)", exc)
        return None


def prestart() -> None:
    """Start a server now unless one is idle, so that the next :func:`begin` finds it booted."""
    with _lock:
        if any(server.proc.poll() is None for server in _idle):
            return
    server = _start()
    if server is not None:
        _give_back(server)


def _take() -> _Server | None:
    with _lock:
        while _idle:
            server = _idle.pop()
            if server.proc.poll() is None:
                return server
            server.close()
    return _start()


def _give_back(server: _Server) -> None:
    with _lock:
        if len(_idle) < _MAX_IDLE:
            _idle.append(server)
            return
    server.close()


def shutdown() -> None:
    """End every idle server now (they end by themselves when this process does)."""
    with _lock:
        servers, _idle[:] = list(_idle), []
    for server in servers:
        server.close()


@_fork.on_child
def _forget_parents_servers() -> None:
    _idle.clear()  # the parent's: a child writing to their pipes would corrupt the parent's requests

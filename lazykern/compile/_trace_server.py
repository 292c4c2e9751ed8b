"""The child process that runs NVRTC's traced passes (``python -m lazykern.compile._trace_server``).

NVRTC's ``--fdevice-time-trace`` can corrupt its own state (traced compiles of headers with ``#line``
directives crashed a process with SIGSEGV or "LLVM ERROR: out of memory"), so no traced compile runs
in a user's process: this server reads one JSON request per line on stdin (``{"source", "name",
"flags", "trace", "cwd"}``, ``flags`` being the NVRTC command line the caller built with
``cuda.core.ProgramOptions`` (syntax-only, writing the trace), ``cwd`` the caller's working
directory now, where NVRTC searches relative names), runs that compile, and answers one JSON line
(``{"ok": true}`` or ``{"ok": false, "error": ...}``). It imports nothing of lazykern (a crash here
takes nothing else down) and only NVRTC's binding, not cuda.core (a quarter second of imports on
every cold process's first compile); it exits when its stdin closes, which happens when the process
that started it ends.
"""

from __future__ import annotations

import json
import os
import sys
from types import ModuleType


def serve() -> None:
    from cuda.bindings import nvrtc

    for line in sys.stdin:
        request = json.loads(line)
        try:
            os.chdir(request["cwd"])
            _compile(nvrtc, request["source"], request["name"], request["flags"])
            answer: dict[str, object] = {"ok": True}
        except Exception as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _compile(api: ModuleType, source: str, name: str, flags: list[str]) -> None:
    """One NVRTC compile of ``source`` with ``flags``; a RuntimeError with NVRTC's log if it fails."""
    err, prog = api.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if int(err) != 0:
        raise RuntimeError(f"nvrtcCreateProgram: {err}")
    try:
        options = [flag.encode() for flag in flags]
        (err,) = api.nvrtcCompileProgram(prog, len(options), options)
        if int(err) != 0:
            raise RuntimeError(f"{err}: {_log(api, prog)}")
    finally:
        api.nvrtcDestroyProgram(prog)


def _log(api: ModuleType, prog: object) -> str:
    err, size = api.nvrtcGetProgramLogSize(prog)
    if int(err) != 0:
        return "(no log)"
    buf = b" " * int(size)
    (err,) = api.nvrtcGetProgramLog(prog, buf)
    return buf.decode(errors="replace").rstrip("\0 \n")


if __name__ == "__main__":
    serve()

"""The child process that runs the observed compile (``python -c`` of this file, see ``_tracer``).

NVRTC's ``--fdevice-time-trace`` can corrupt its own state (traced compiles of headers with ``#line``
directives crashed a process with SIGSEGV or "LLVM ERROR: out of memory"), so no traced compile runs
in a user's process. This server reads one JSON request per line on stdin (``{"source", "name",
"flags", "target", "cwd", "cwd_id"}``: the user's exact bytes, the NVRTC command line the caller built
with ``cuda.core.ProgramOptions``, ``"cubin"``/``"ptx"``/``"ltoir"``, and the caller's working
directory at the compile's start with its ``[st_dev, st_ino]``), compiles them with the trace on, and
answers one JSON line: ``{"ok": true, "code": base64 of NVRTC's output, "events": [[ts, dur, path],
...]}`` (the trace's "Processing Header File" events) or ``{"ok": false, "error": ...}``. The binary
and the header events come from the same compile: that is what the store keeps (one observation).

It imports nothing of lazykern (a crash here takes nothing else down) and only NVRTC's binding, not
cuda.core (a quarter second of imports on every cold process's first compile). Traces go to a
directory of its own under ``sys.argv[1]``, removed at exit. It ends when its stdin closes, and
also when the process that started it is gone (a watchdog: a compile stuck on a FIFO header would
otherwise outlive it).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

_EVENT = "Processing Header File"
_WATCH_S = 0.2


def serve(before: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Answer requests until stdin closes; ``before(request)`` runs ahead of each compile (tests
    make the window between a compile's start and its record deterministic with it)."""
    from cuda.bindings import nvrtc

    _watch_parent(os.getppid())
    base = sys.argv[1] if len(sys.argv) > 1 and os.path.isdir(sys.argv[1]) else None
    scratch = tempfile.mkdtemp(prefix=f"server-{os.getpid()}-", dir=base)
    try:
        for line in sys.stdin:
            request = json.loads(line)
            try:
                if before is not None:
                    before(request)
                answer = _answer(nvrtc, request, os.path.join(scratch, "trace"))
            except Exception as exc:
                answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _watch_parent(parent: int) -> None:
    """Exit once the parent is gone (re-parented): nothing started here outlives its owner."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_S)
        os._exit(0)

    threading.Thread(target=watch, name="lazykern-trace-watchdog", daemon=True).start()


def _answer(api: ModuleType, request: dict[str, Any], trace: str) -> dict[str, Any]:
    os.chdir(request["cwd"])
    here = os.stat(".")
    if [here.st_dev, here.st_ino] != list(request["cwd_id"]):
        raise RuntimeError(f"the working directory {request['cwd']} was replaced since the compile started")
    for stale in (trace, trace + ".json"):
        if os.path.lexists(stale):
            os.unlink(stale)
    flags = [*request["flags"], f"--fdevice-time-trace={trace}"]
    code = _compile(api, request["source"], request["name"], flags, request["target"])
    # NVRTC names the file FILE.json (13.x) or FILE itself.
    written = trace + ".json" if os.path.exists(trace + ".json") else trace
    try:
        with open(written, "rb") as fh:
            events = _events(json.load(fh))
    finally:
        for path in (trace, trace + ".json"):
            if os.path.lexists(path):
                os.unlink(path)
    return {"ok": True, "code": base64.b64encode(code).decode(), "events": events}


def _events(data: Any) -> list[list[Any]]:
    raw = data.get("traceEvents", []) if isinstance(data, dict) else data
    out = []
    for e in raw if isinstance(raw, list) else []:
        if isinstance(e, dict) and e.get("name") == _EVENT:
            path = (e.get("args") or {}).get("detail")
            if isinstance(path, str):
                out.append([int(e.get("ts", 0)), int(e.get("dur", 0)), path])
    return out


def _compile(api: ModuleType, source: str, name: str, flags: list[str], target: str) -> bytes:
    """One NVRTC compile of ``source``; its output, or a RuntimeError with NVRTC's log."""
    err, prog = api.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if int(err) != 0:
        raise RuntimeError(f"nvrtcCreateProgram: {err}")
    try:
        options = [flag.encode() for flag in flags]
        (err,) = api.nvrtcCompileProgram(prog, len(options), options)
        if int(err) != 0:
            raise RuntimeError(f"{err}: {_log(api, prog)}")
        getters = {
            "cubin": (api.nvrtcGetCUBINSize, api.nvrtcGetCUBIN),
            "ptx": (api.nvrtcGetPTXSize, api.nvrtcGetPTX),
            "ltoir": (api.nvrtcGetLTOIRSize, api.nvrtcGetLTOIR),
        }
        size_of, get = getters[target]
        err, size = size_of(prog)
        if int(err) != 0:
            raise RuntimeError(f"{size_of.__name__}: {err}")
        buf = b" " * int(size)
        (err,) = get(prog, buf)
        if int(err) != 0:
            raise RuntimeError(f"{get.__name__}: {err}")
        return buf.rstrip(b"\0") if target == "ptx" else buf  # PTX is text: NVRTC counts its NUL
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

"""The child process that runs NVRTC's traced passes (``python -m lazykern.compile._trace_server``).

NVRTC's ``--fdevice-time-trace`` can corrupt its own state (traced compiles of headers with ``#line``
directives crashed a process with SIGSEGV or "LLVM ERROR: out of memory"), so no traced compile runs
in a user's process: this server reads one JSON request per line on stdin (``{"source", "name",
"arch", "options", "trace", "cwd"}``, ``options`` being ``cuda.core.ProgramOptions`` keywords, ``cwd``
the caller's working directory now, where NVRTC searches relative names), runs a
syntax-only compile that writes the trace, and answers one JSON line (``{"ok": true}`` or
``{"ok": false, "error": ...}``). It imports nothing of lazykern (a crash here takes nothing
else down) and exits when its stdin closes, which happens when the process that started it ends.
"""

from __future__ import annotations

import json
import os
import sys


def serve() -> None:
    from cuda.core import Program, ProgramOptions

    for line in sys.stdin:
        request = json.loads(line)
        try:
            os.chdir(request["cwd"])
            options = ProgramOptions(
                arch=request["arch"],
                name=request["name"],
                fdevice_syntax_only=True,
                fdevice_time_trace=request["trace"],
                **request["options"],
            )
            Program(request["source"], "c++", options=options).compile("cubin")
            answer: dict[str, object] = {"ok": True}
        except Exception as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()

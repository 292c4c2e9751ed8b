"""Compile servers for tests: the real one (lazykern/compile/_trace_server.py) with a hook that runs
before each compile: slow, crashing or hanging on purpose, or changing files inside the window
between a compile's start and its record (deterministic, no race to win)."""

from __future__ import annotations

import os
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "lazykern", "compile", "_trace_server.py")


def boot(tmp_path, body: str, name: str = "server.py") -> str:
    """A ``_tracer._BOOT`` whose server runs ``body`` (``request`` in scope) before each compile."""
    script = tmp_path / name
    script.write_text(
        "import json, os, runpy, sys, time\n"
        f"server = runpy.run_path({SERVER!r})\n"
        "def before(request):\n" + textwrap.indent(textwrap.dedent(body), "    ") + "\n    pass\n"
        "server['serve'](before)\n"
    )
    return f"import runpy, sys; sys.path.pop(0); runpy.run_path({str(script)!r}, run_name='__main__')"

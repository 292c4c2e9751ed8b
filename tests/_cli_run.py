"""Run what a user types: ``python3 -m lazykern ...`` or a Python script, in a fresh process.

Root ignores file permissions; :func:`as_a_user` drops the two capabilities that let it, so a
read-only or mode-000 directory means for the child what it means for everybody else.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def env_for(cache_dir: Path | str | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAZYKERN_", "NUMBA_ENABLE_CUDASIM"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    if cache_dir is not None:
        env["LAZYKERN_CACHE_DIR"] = str(cache_dir)
    env["COLUMNS"] = "200"  # one table row per line: the assertions read rows
    env.update(extra)
    return env


def as_a_user() -> list[str]:
    """The command prefix under which file permissions apply to this process's children."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        import pytest

        pytest.skip("running as root without setpriv: file permissions cannot be made to apply")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def run(args: list[str], env: dict[str, str], *, user: bool = False, cwd: Path | str | None = None, timeout=300):
    """``args`` after the interpreter (``["-m", "lazykern", "cache", "info"]``); returns the CompletedProcess."""
    cmd = [*(as_a_user() if user else []), sys.executable, *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def lazykern(*args: str, env: dict[str, str], user: bool = False, cwd: Path | str | None = None, timeout=300):
    return run(["-m", "lazykern", *args], env, user=user, cwd=cwd, timeout=timeout)

"""Child processes lazykern starts that exit by themselves when their stdin closes (the contraction
planner's, the spread's and the NVRTC trace servers): the polite first step of ending one."""

from __future__ import annotations

import subprocess
from typing import Any


def ask_to_exit(proc: subprocess.Popen[Any], grace: float) -> None:
    """Close ``proc``'s stdin and wait up to ``grace`` seconds for it to exit; a child already gone, a
    closed pipe or one still running after ``grace`` is left to the caller (who kills what remains)."""
    if grace <= 0 or proc.stdin is None:
        return
    try:
        proc.stdin.close()
        proc.wait(timeout=grace)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass

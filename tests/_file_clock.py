"""Step past the file clock: a compile that starts in the clock tick of a change it reads is (rightly) not stored.

Both waits observe the clock the store compares with (:func:`lazykern.compile._manifest.start_ns`), not a
fixed sleep: under load a VM's coarse clock can lag the fine one that stamps files by more than a tick.
"""

from __future__ import annotations

import os
import time

from lazykern.compile import _manifest


def settled(path) -> None:
    """Wait until a compile starting now is later than ``path``'s last change on the file clock."""
    st = os.stat(path)
    while _manifest.start_ns() <= max(st.st_mtime_ns, st.st_ctime_ns):
        time.sleep(0.002)


def step_past() -> None:
    """Wait until a compile starting now is later on the file clock than every change made before this
    call (files and directories alike: each was stamped at or before the fine clock's now)."""
    before = time.time_ns()
    while _manifest.start_ns() <= before:
        time.sleep(0.002)

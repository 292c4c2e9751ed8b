"""Step past the file clock: a compile that starts in the clock tick of a change it reads is (rightly) not stored."""

from __future__ import annotations

import os
import time

from lazykern.compile import _manifest


def settled(path) -> None:
    """Wait until a compile starting now is later than ``path``'s last change on the file clock."""
    st = os.stat(path)
    while _manifest.start_ns() <= max(st.st_mtime_ns, st.st_ctime_ns):
        time.sleep(0.002)

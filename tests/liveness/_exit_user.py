"""A program that uses lazykern's parallel and threaded paths, then reports what is still running.

Prints one JSON line (threads and child processes left once the work returned), then ``done``;
the test checks that the interpreter then exits at once.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lazykern.families.warm import warm  # noqa: E402
from tests.liveness._family import make_family  # noqa: E402
from tests.liveness._proc import children, cmdline  # noqa: E402


def main() -> None:
    summary = warm("tests.liveness._family:family", archs=["sm_90"], jobs=2)
    family = make_family(4)
    with ThreadPoolExecutor(4) as pool:  # the user's threads asking for the same kernels at once
        list(pool.map(lambda name: family.get(name, "sm_90"), family.names() * 2))
    left = {
        "ok": summary.ok and summary.persisted,
        "threads": [t.name for t in threading.enumerate() if t is not threading.main_thread()],
        "children": [cmdline(p) for p in children(os.getpid()) if "resource_tracker" not in cmdline(p)],
    }
    print(json.dumps(left), flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()

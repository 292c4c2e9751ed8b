"""A process that forks (multiprocessing's "fork" start method) while another thread compiles.

argv: mode [cuda]. ``same``: the thread's compile is held open (a slow compile around the real one)
and the child asks for the same kernel. ``nvrtc``: the fork happens while the thread is inside NVRTC
itself, and the child compiles another kernel. ``cuda`` (GPU runs, benchmarks/liveness_gpu.py):
a CUDA context is open in the parent first, and the parent launches its kernel after the child ends.
Prints one JSON line: the child's exit code and seconds.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lazykern import _fork  # noqa: E402
from lazykern.compile import compiler  # noqa: E402
from tests.liveness._family import make_family  # noqa: E402


def child(family, name: str, out) -> None:
    start = time.monotonic()
    kernel = family.get(name, "sm_90")
    out.put({"kernel": kernel.name, "seconds": round(time.monotonic() - start, 3)})


def main() -> None:
    mode = sys.argv[1]
    with_cuda = sys.argv[2:] == ["cuda"]
    if with_cuda:
        from numba import cuda

        cuda.current_context()
    family = make_family(3)
    inside = threading.Event()
    if mode == "same":
        real = compiler.compile_deferred

        def slow(source, **kwargs):
            inside.set()
            time.sleep(1.0)  # holds the family's and the cache's per-kernel locks meanwhile
            return real(source, **kwargs)

        compiler.compile_deferred = slow
        wanted = "add_0"
    else:
        wanted = "add_1"
    compiling = threading.Thread(target=family.get, args=("add_0", "sm_90"))
    compiling.start()
    deadline = time.monotonic() + 30
    while not (inside.is_set() if mode == "same" else _fork._inside_native > 0):
        assert time.monotonic() < deadline, "the compile never started"
        time.sleep(0.0005)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start = time.monotonic()
    proc = ctx.Process(target=child, args=(family, wanted, out))
    proc.start()
    proc.join(45)
    hung = proc.is_alive()
    if hung:
        proc.kill()
        proc.join()
    compiling.join()
    result = {"exit": proc.exitcode, "hung": hung, "seconds": round(time.monotonic() - start, 3)}
    if proc.exitcode == 0:
        result.update(out.get(timeout=5))
    if with_cuda:
        import numpy as np

        data = cuda.to_device(np.zeros(32, np.int32))
        family.get("add_0")[1, 32](data, 32)  # the parent's context still works after the fork
        result["parent_launch"] = int(data.copy_to_host()[0])
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

"""Scenarios for tests/liveness/test_compile_servers.py: ``python _servers_user.py SCENARIO TMP``.

Each prints JSON lines the test reads (server pids, timings), then exits on its own.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from lazykern import KernelCache, KernelFamily
from lazykern.compile import _tracer
from lazykern.store import _later

KERNEL = 'extern "C" __global__ void {name}(int *a) {{ *a = {value}; }}\n'


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def loop(tmp: str) -> None:
    """30 kernels in a loop: the servers alive at any moment never exceed the pool."""
    fam = KernelFamily("loop", "", cache=KernelCache(os.path.join(tmp, "store")))
    for i in range(30):
        fam.add(f"k{i}", KERNEL.format(name=f"k{i}", value=i))
    most, stop = [0], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            most[0] = max(most[0], len(_tracer.servers()))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    for i in range(30):
        fam.get(f"k{i}", "sm_80")
    _later.wait_all()
    stop.set()
    watcher.join()
    stored = sum(1 for e in KernelCache(os.path.join(tmp, "store")).entries() if not e.get("memory_only"))
    say(most=most[0], pool=_tracer.SERVERS, stored=stored, servers=_tracer.servers())


def fifo(tmp: str) -> None:
    """A header that is a FIFO in the compile server only (a hook swaps it in before its compile):
    the observed compile blocks on it. It is bounded; an unrelated kernel is stored meanwhile."""
    inc = os.path.join(tmp, "inc")
    header = os.path.join(inc, "v.h")
    _tracer.MIN_BOUND_S = float(sys.argv[3])
    from pathlib import Path

    from tests import _servers

    swap = f"if 'v.h' in request['source'] and not os.path.exists({header!r} + '.done'):\n"
    swap += f"    open({header!r} + '.done', 'w').close(); os.remove({header!r}); os.mkfifo({header!r})"
    _tracer._BOOT = _servers.boot(Path(tmp), swap)
    slow = KernelFamily("fifo", "#include <v.h>\n", options=[f"-I{inc}"], cache=KernelCache(os.path.join(tmp, "s1")))
    slow.add("k", KERNEL.format(name="k", value="VAL"))
    start = time.monotonic()
    slow.get("k", "sm_80")
    say(served=time.monotonic() - start, servers=_tracer.servers())
    other = KernelFamily("other", "", cache=KernelCache(os.path.join(tmp, "s2")))
    other.add("j", KERNEL.format(name="j", value=5))
    start = time.monotonic()
    other.get("j", "sm_80")
    _later.wait_for(other.key("j", "sm_80"))
    again = KernelFamily("other", "", cache=KernelCache(os.path.join(tmp, "s2")))
    again.add("j", KERNEL.format(name="j", value=5))
    again.get("j", "sm_80")
    say(other=time.monotonic() - start, other_compiles=again.compile_calls, header_is_fifo=os.path.exists(header))
    say(servers=_tracer.servers(), pending=len(_later.pending()), exiting=time.time())


def chdir(tmp: str) -> None:
    """chdir right after the first call: the entry is stored all the same (names are the compile's)."""
    fam = KernelFamily("cd", '#include "v.h"\n', cache=KernelCache(os.path.join(tmp, "store")))
    fam.add("k", KERNEL.format(name="k", value="VAL"))
    kernel = fam.get("k", "sm_80")
    os.chdir(sys.argv[3])
    say(compiled=fam.compile_calls, value=kernel.meta.get("compile_seconds") is not None)


def lookup(tmp: str) -> None:
    """A fresh process asking for what ``chdir``/``memory`` compiled."""
    import warnings

    source = sys.argv[3]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fam = KernelFamily(sys.argv[4], source, cache=KernelCache(os.path.join(tmp, "store")))
        fam.add("k", KERNEL.format(name="k", value="VAL"))
        fam.get("k", "sm_80")
        _later.wait_all()
    rows = [{"memory_only": e.get("memory_only", ""), "bytes": e["bytes"]} for e in fam.cache.entries()]
    say(compiled=fam.compile_calls, warnings=[str(w.message) for w in caught], rows=rows)


if __name__ == "__main__":
    {"loop": loop, "fifo": fifo, "chdir": chdir, "lookup": lookup}[sys.argv[1]](sys.argv[2])

"""A process that keeps filling the cache until it is killed (SIGKILL) by the test.

argv: cache_dir seed [mode]. Prints "ready", then "stored <key>" after each entry is
durably in the store (store() returned), so the test knows what must survive.
Keys are payload keys ("p<i>": deterministic bytes, 1 KB to 120 KB, inline
or file-backed) and, every eighth one, a real NVRTC compile of a synthetic
fragment. Mode "mid-blob" kills itself halfway through writing a blob file,
"after-blob" right after a blob file is written and before its row is
committed; mode "timer" (default) waits for the test's SIGKILL.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _families import synthetic_family  # noqa: E402

from lazykern import KernelCache, LazykernWarning  # noqa: E402
from lazykern.store import _later  # noqa: E402
from lazykern.store._store import NoPickleDisk  # noqa: E402

N_PAYLOADS = 300


def payload(i: int) -> bytes:
    size = 1024 + (i * 7919) % (120 * 1024)
    unit = f"payload-{i}-".encode()
    return (unit * (size // len(unit) + 1))[:size]


def inject_kill(mode: str, nth: int) -> None:
    """Make the nth blob-file write kill this process, in the middle of it or just after it."""
    real_write = NoPickleDisk._write
    calls = [0]

    def write(self, full_path, iterator, mode_, encoding=None):
        calls[0] += 1
        if calls[0] < nth:
            return real_write(self, full_path, iterator, mode_, encoding)
        if mode == "mid-blob":
            data = b"".join(iterator)
            os.makedirs(os.path.dirname(full_path), exist_ok=True)
            with open(full_path, mode_) as fh:
                fh.write(data[: len(data) // 2])
                fh.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        size = real_write(self, full_path, iterator, mode_, encoding)
        os.kill(os.getpid(), signal.SIGKILL)
        return size

    NoPickleDisk._write = write


def main() -> None:
    directory, seed = sys.argv[1], int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "timer"
    rng = random.Random(seed)
    warnings.simplefilter("error", LazykernWarning)  # a store that did not persist must not say "stored"
    if mode != "timer":
        inject_kill(mode, nth=1 + rng.randrange(6))
    cache = KernelCache(directory)
    fam = synthetic_family(cache)
    names = fam.names()
    print("ready", flush=True)
    order = list(range(N_PAYLOADS))
    rng.shuffle(order)
    for n, i in enumerate(order):
        if n % 8 == 7:
            name = names[rng.randrange(len(names))]
            fam.get(name, "sm_90")
            _later.wait_for(fam.key(name, "sm_90"))  # a fresh compile is stored after its traced pass
            print("stored", fam.key(name, "sm_90"), flush=True)
        key = f"p{i}"
        cache.get_or_compile(key, lambda i=i: (payload(i), {"kernel": f"p{i}"}))
        print("stored", key, flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()

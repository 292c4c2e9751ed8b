"""One process of the concurrency test: wait for the start signal, warm a family from N threads.

argv: cache_dir family_kind threads go_file. Prints one JSON line.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _families import make_family  # noqa: E402

from lazykern import KernelCache  # noqa: E402
from lazykern.compile import compiler  # noqa: E402


def main() -> None:
    directory, kind, threads, go_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    compiles: collections.Counter[str] = collections.Counter()
    guard = threading.Lock()
    real_compile = compiler.compile_deferred

    def counting_compile(source, *, name, **kwargs):
        with guard:
            compiles[name] += 1
        return real_compile(source, name=name, **kwargs)

    compiler.compile_deferred = counting_compile
    cache = KernelCache(directory)
    fam = make_family(kind, cache)
    names = fam.names()
    while not os.path.exists(go_file):
        time.sleep(0.005)

    def warm(offset: int) -> dict[str, str]:
        order = names[offset:] + names[:offset]  # threads start on different keys
        return {n: hashlib.sha256(fam.get(n, "sm_90").code).hexdigest() for n in order}

    with ThreadPoolExecutor(threads) as pool:
        per_thread = list(pool.map(warm, [i * len(names) // threads for i in range(threads)]))
    digests = {n: sorted({d[n] for d in per_thread}) for n in names}
    print(json.dumps({"compiles": dict(compiles), "digests": digests, "stats": cache.stats()}, default=str))


if __name__ == "__main__":
    main()

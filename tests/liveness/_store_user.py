"""A process using the store while another holds SQLite's write lock. Prints one JSON line per step.

argv: go_file (optional): after opening, wait for this file to exist before the lookups.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

from lazykern.store.cache import KernelCache


def step(name: str, start: float, **data: object) -> None:
    print(json.dumps({"step": name, "seconds": round(time.monotonic() - start, 3), **data}), flush=True)


def main() -> None:
    compiles = []

    def compile_b() -> tuple[bytes, dict]:
        compiles.append("b")
        return b"\x7fELF-b", {"kernel": "b"}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.monotonic()
        cache = KernelCache()
        step("open", start, backend=cache.backend)
        if len(sys.argv) > 1:
            while not os.path.exists(sys.argv[1]):
                time.sleep(0.01)
        start = time.monotonic()
        found = cache.lookup("a")
        step("lookup", start, found=found is not None)
        start = time.monotonic()
        found = cache.lookup("a")
        step("lookup2", start, found=found is not None)
        start = time.monotonic()
        entry, fresh = cache.get_or_compile("b", compile_b)
        step("compile", start, fresh=fresh, code=entry.code.decode())
        start = time.monotonic()
        entry, fresh = cache.get_or_compile("b", compile_b)
        step("again", start, fresh=fresh, compiles=len(compiles))
    said = [str(w.message) for w in caught if "lazykern" in str(w.message)]
    step("done", time.monotonic(), warnings=said)


if __name__ == "__main__":
    main()

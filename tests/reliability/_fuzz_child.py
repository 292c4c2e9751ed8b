"""One fuzz case, in a fresh process under a memory limit: every public entry point against one directory.

Run as ``python _fuzz_child.py JSON``; JSON holds ``mode`` ("store" or "bundle"), ``directory``,
``bundle`` (a path or null), ``expected`` (kernel name -> sha256 of a fresh compile) and ``mem_mb``
(the address-space limit). Prints one JSON line: ``wrong`` (kernels served with other bytes than a
fresh compile), ``crashes`` (exceptions beyond the documented ones), ``maxrss_kb``.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from typing import Any


def main() -> None:
    args = json.loads(sys.argv[1])
    limit = args["mem_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    warnings.simplefilter("ignore")  # LazykernWarnings are the documented way to report damage

    from _families import synthetic_family
    from typer.testing import CliRunner

    from lazykern import KernelCache, LazykernError
    from lazykern.scale.bundle import import_bundle
    from lazykern.store.cache import set_default_cache
    from lazykern.tools.cli import app

    out: dict[str, Any] = {"wrong": 0, "crashes": [], "served": 0}
    expected: dict[str, str] = args["expected"]
    directory: str = args["directory"]

    def guard(name: str, fn: Callable[[], Any], allowed: tuple[type[BaseException], ...] = ()) -> Any:
        try:
            return fn()
        except allowed:
            return None
        except Exception as exc:
            tb = traceback.format_exc().strip().splitlines()[-4:]
            out["crashes"].append(f"{name}: {type(exc).__name__}: {str(exc)[:200]} | {' / '.join(tb)[:600]}")
            return None

    def serve(label: str) -> None:
        fam = synthetic_family(KernelCache(directory, lock_timeout=2), n=len(expected))
        for name, digest in expected.items():
            kernel = guard(f"{label} family[{name}]", lambda name=name: fam[name])
            if kernel is not None:
                out["served"] += 1
                out["wrong"] += hashlib.sha256(kernel.code).hexdigest() != digest
        guard(f"{label} warm", fam.warm)

    runner = CliRunner()

    def cli(*argv: str) -> None:
        set_default_cache(None)
        result = runner.invoke(app, ["--cache-dir", directory, *argv])
        if result.exit_code not in (0, 1) or not (result.exception is None or isinstance(result.exception, SystemExit)):
            detail = "".join(traceback.format_exception(result.exception))[-600:] if result.exception else ""
            out["crashes"].append(f"cli {' '.join(argv)}: exit {result.exit_code}: {result.output[-300:]} {detail}")
        elif "Traceback" in result.output:
            out["crashes"].append(f"cli {' '.join(argv)}: traceback in output: {result.output[-300:]}")

    scratch = tempfile.mkdtemp(prefix="lzk-fuzz-")
    if args["mode"] == "bundle":
        kc = KernelCache(directory)
        _reset_peak()
        before = _status_kb("VmRSS")
        guard("import_bundle", lambda: import_bundle(kc, args["bundle"]), (LazykernError,))
        out["import_growth_kb"] = _status_kb("VmHWM") - before
        cli("cache", "import", args["bundle"])
        serve("after import")
    else:
        serve("first")
        kc = KernelCache(directory, lock_timeout=2)
        guard("stats", kc.stats)
        guard("entries", lambda: list(kc.entries()))
        guard("check", kc.check)
        guard("persistent_counters", kc.persistent_counters)
        guard("len", lambda: len(kc))
        for argv in (("info",), ("info", "--json"), ("ls",), ("ls", "--json")):
            cli("cache", *argv)
        cli("cache", "export", os.path.join(scratch, "b.tar.gz"))
        if os.path.exists(os.path.join(scratch, "b.tar.gz")):
            cli("cache", "import", os.path.join(scratch, "b.tar.gz"))
        cli("cache", "info", "--repair")
        serve("after repair")
        cli("cache", "prune", "--older-than", "3650d", "--max-size", "100M")
        cli("cache", "clear", "--yes")
        serve("after clear")
    out["backend"] = KernelCache(directory).backend  # never memory-only for good after any damage
    out["maxrss_kb"] = _status_kb("VmHWM")
    print(json.dumps(out))


def _reset_peak() -> None:
    """Start VmHWM afresh, so that it measures the import alone (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _status_kb(field: str) -> int:
    """A memory figure of this process from /proc (ru_maxrss would include the parent's, kept across exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


if __name__ == "__main__":
    main()

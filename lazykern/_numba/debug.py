"""``debug=True`` kernels: the exceptions their Python code raises, stored and raised as numba-cuda does.

numba-cuda compiles a debug kernel with an ``<symbol>__errcode__`` global (and the failing thread's
``__tid{z,y,x}__`` / ``__ctaid{z,y,x}__``), zeroes the code before each launch, reads it back after
(synchronously) and raises the exception its call helper registered under that code, prefixed with
the source location and the thread position. Here the helper's table is written into the entry's
JSON metadata (exception classes by module and qualified name), so a process that loads the cubin
from the store raises the same exceptions; a table that cannot be named so keeps the entry in memory.
"""

from __future__ import annotations

import builtins
import importlib
import json
import os
from typing import Any


def exception_table(call_helper: Any) -> tuple[dict[str, Any], str | None]:
    """``(JSON-able table, reason it cannot be persisted or None)`` from a compile's call helper
    (``numba.cuda.core.callconv._MinimalCallHelper.exceptions``: code -> (class, args, location))."""
    table: dict[str, Any] = {}
    reason = None
    for code, (exc, exc_args, loc) in getattr(call_helper, "exceptions", {}).items():
        name = f"{exc.__module__}:{exc.__qualname__}"
        entry = {"class": name, "args": list(exc_args or ()), "loc": list(loc) if loc else None}
        try:
            json.dumps(entry)
            found = _exception_class(name)
        except (TypeError, ValueError, ImportError, AttributeError):
            found = None
        if found is not exc:
            raised = f"{exc.__qualname__}{tuple(exc_args or ())!r}"
            reason = f"debug=True: the kernel raises {raised}, which a new process cannot rebuild by name"
        table[str(code)] = entry
    return table, reason


def _exception_class(name: str) -> Any:
    module, _, qualname = name.partition(":")
    obj: Any = builtins if module == "builtins" else importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def raise_for(table: dict[str, Any], code: int, read_symbol: Any, name: str) -> None:
    """Raise what a debug kernel reported (``code`` != 0), worded as numba-cuda words it.

    ``read_symbol(suffix)`` reads the int32 global ``<symbol>__<suffix>__``."""
    entry = table.get(str(code))
    if entry is None:
        exc: Any = SystemError
        args: list[Any] = [f"unknown error {code} in native function"]
        loc = None
    else:
        exc, args, loc = _exception_class(entry["class"]), list(entry["args"]), entry["loc"]
    tid = [read_symbol("tid" + i) for i in "zyx"]
    ctaid = [read_symbol("ctaid" + i) for i in "zyx"]
    locinfo = ""
    if loc is not None:
        sym, filepath, lineno = loc
        locinfo = f"In function {sym!r}, file {os.path.abspath(filepath)}, line {lineno}, "
    prefix = f"{locinfo}tid={tid} ctaid={ctaid}"
    args = [f"{prefix}: {args[0]}", *args[1:]] if args else [prefix]
    raise exc(*args)

"""``%load_ext lazykern``: the ``%lazykern`` line magic for notebooks.

``%lazykern cache``            the cache (location, counters) as a table
``%lazykern cache ls [FAMILY]``  one row per cached kernel
``%lazykern warm FAMILY [--kernels GLOB] [--arch sm_80,sm_90] [-j N]``
                               compile ahead of time; returns the summary

Results are returned, not printed, so Jupyter renders their HTML and a cell
can keep them (``summary = %lazykern warm tropical``).
"""

from __future__ import annotations

import argparse
import html
import shlex
from typing import Any

from .errors import MagicUsageError

USAGE = (
    "usage: %lazykern cache | %lazykern cache ls [FAMILY] | "
    "%lazykern warm FAMILY [--kernels GLOB] [--arch sm_80,sm_90] [-j N]"
)


class EntryTable(list):
    """Cache entries (dicts) that render as an HTML table in Jupyter."""

    def _repr_html_(self) -> str:
        cols = ("family", "kernel", "arch", "bytes", "compile_seconds")
        head = "".join(f"<th>{c}</th>" for c in cols)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(row.get(c, '-')))}</td>" for c in cols) + "</tr>" for row in self
        )
        return f"<b>{len(self)} cached kernels</b><table><tr>{head}</tr>{body}</table>"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would exit the kernel's process
        raise MagicUsageError(f"{message}\n{USAGE}")


def _warm_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%lazykern warm", add_help=False, exit_on_error=False)
    p.add_argument("family")
    p.add_argument("--kernels", "-k", action="append", default=[])
    p.add_argument("--arch", "-a", action="append", default=[])
    p.add_argument("--jobs", "-j", type=int, default=1)
    return p


def lazykern_magic(line: str) -> Any:
    """Run one ``%lazykern`` line; return what the cell should display."""
    from .cache import default_cache
    from .cli._common import split_list

    args = shlex.split(line)
    if not args:
        raise MagicUsageError(USAGE)
    if args[0] == "cache":
        if len(args) == 1:
            return default_cache()
        if args[1] == "ls" and len(args) <= 3:
            family = args[2] if len(args) == 3 else None
            rows = [r for r in default_cache().entries() if family is None or r.get("family") == family]
            return EntryTable(sorted(rows, key=lambda r: (str(r.get("family")), str(r.get("kernel")))))
        raise MagicUsageError(USAGE)
    if args[0] == "warm":
        from .cli._warm import warm

        try:
            ns, extra = _warm_parser().parse_known_args(args[1:])
        except argparse.ArgumentError as exc:
            raise MagicUsageError(f"{exc}\n{USAGE}") from None
        if extra:
            raise MagicUsageError(f"unexpected arguments {extra}\n{USAGE}")
        return warm(
            ns.family, patterns=split_list(ns.kernels), archs=split_list(ns.arch) or [None], jobs=max(ns.jobs, 1)
        )
    raise MagicUsageError(USAGE)


def load_ipython_extension(ip: Any) -> None:
    """Called by ``%load_ext lazykern`` (and ``%load_ext lazykern.ipython``)."""
    ip.register_magic_function(lazykern_magic, magic_kind="line", magic_name="lazykern")

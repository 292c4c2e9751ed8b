"""``%load_ext lazykern``: the ``%lazykern`` line magic for notebooks.

``%lazykern cache``            the cache (location, counters) as a table
``%lazykern cache ls [FAMILY]``  one row per cached kernel
``%lazykern warm FAMILY [--kernels GLOB] [--arch sm_80,sm_90] [-j N]``
                               compile ahead of time; returns the summary

Results are returned, not printed, so Jupyter renders their HTML and a cell
can keep them (``summary = %lazykern warm tropical``).
"""

from __future__ import annotations

import html
import shlex
from typing import Any, NoReturn

from ..errors import LazykernError
from ..families.warm import kernel_label, split_list, warm
from ..store.cache import default_cache

USAGE = (
    "usage: %lazykern cache | %lazykern cache ls [FAMILY] | "
    "%lazykern warm FAMILY [--kernels GLOB] [--arch sm_80,sm_90] [-j N]"
)


class EntryTable(list[dict[str, Any]]):
    """Cache entries (dicts) that render as an HTML table in Jupyter."""

    def _repr_html_(self) -> str:
        cols = ("family", "kernel", "arch", "bytes", "compile_seconds")
        head = "".join(f"<th>{c}</th>" for c in cols)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(kernel_label(row) if c == 'kernel' else str(row.get(c, '-')))}</td>" for c in cols
            )
            + "</tr>"
            for row in self
        )
        return f"<b>{len(self)} cached kernels</b><table><tr>{head}</tr>{body}</table>"


def _parser() -> Any:
    """The magic's arguments, parsed by IPython's ``MagicArgumentParser``: a bad line is a
    ``UsageError`` (one line in the notebook, no traceback), never a process exit."""
    from IPython.core.error import UsageError
    from IPython.core.magic_arguments import MagicArgumentParser

    class Parser(MagicArgumentParser):  # type: ignore[misc]  # IPython is untyped here (Any): a real class at run time
        def error(self, message: str) -> NoReturn:
            raise UsageError(f"{message}\n{USAGE}")

    p = Parser(prog="%lazykern")
    sub = p.add_subparsers(dest="command", required=True, metavar="{cache,warm}")
    cache = sub.add_parser("cache", help="the cache as a table, or `cache ls [FAMILY]`: its entries")
    cache.add_argument("what", nargs="?", choices=["ls"])
    cache.add_argument("family", nargs="?")
    warm = sub.add_parser("warm", help="compile a family's kernels ahead of time")
    warm.add_argument("family")
    warm.add_argument("--kernels", "-k", action="append", default=[])
    warm.add_argument("--arch", "-a", action="append", default=[])
    warm.add_argument("--jobs", "-j", type=int, default=1)
    return p


def lazykern_magic(line: str) -> Any:
    """Run one ``%lazykern`` line; return what the cell should display."""
    from IPython.core.error import UsageError

    try:
        words = shlex.split(line)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"{exc}\n{USAGE}") from None
    args = _parser().parse_args(words)
    try:
        return _run(args)
    except LazykernError as exc:  # IPython shows a UsageError as one line, without a traceback
        raise UsageError(str(exc)) from None


def _run(args: Any) -> Any:
    from IPython.core.error import UsageError

    if args.command == "cache":
        if args.what is None:
            if args.family is not None:
                raise UsageError(USAGE)
            return default_cache()
        rows = [r for r in default_cache().entries() if args.family is None or r.get("family") == args.family]
        return EntryTable(sorted(rows, key=lambda r: (str(r.get("family")), kernel_label(r))))
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    return warm(args.family, patterns=split_list(args.kernels), archs=split_list(args.arch) or [None], jobs=args.jobs)


def load_ipython_extension(ip: Any) -> None:
    """Called by ``%load_ext lazykern`` (and ``%load_ext lazykern.ipython``)."""
    lazykern_magic.__doc__ = f"{__doc__}\n{_parser().format_help()}"  # what `%lazykern?` shows
    ip.register_magic_function(lazykern_magic, magic_kind="line", magic_name="lazykern")

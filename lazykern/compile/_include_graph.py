"""Every header a translation unit can read, by NVRTC's search rules, over the preprocessor's tokens.

NVRTC's trace names the headers it opened, but a ``#line`` or GNU line marker in a header renames
that header's events (the header itself may not appear at all, and a name may be a file that was
never opened), and NVRTC reports no ``__has_include`` probe. So the manifest also follows the
includes itself (:mod:`._pp`: splices and comments first, then tokens), as a superset:

* every ``#include``/``#include_next``/``#import`` is followed whatever ``#if`` surrounds it; an
  operand that is a macro is expanded through every object-like definition any file (or ``-D``)
  gives it; ``#include_next`` records every place. The places searched before the header found
  are ``absent``; a quoted include searches the including file's directory, then each directory of
  ``search_dirs``; an angled one ``search_dirs`` only.
* headers under ``pinned_dirs`` (the toolkit's) are recorded but not scanned: NVRTC's trace
  reports what they include, and the toolchain fingerprint pins them.
* each ``__has_include`` (or object-like alias of it) followed by a literal operand is a probe of
  the places it searches; one inside a macro body may be expanded in any file: every file's
  directory is a candidate.

What cannot be followed exactly (an operand a function-like macro or ``__FILE__`` supplies, a probe
whose operand or spelling comes from a macro, a ``#line`` whose name a macro supplies) is reported
in :attr:`Graph.unknown`: that compile must stay in memory.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

from . import _pp

_DEPTH = 16  # macro expansions followed for one operand


@dataclasses.dataclass
class Graph:
    """The result of :func:`follow`; paths as NVRTC would spell them (joined, never normalised)."""

    files: list[str] = dataclasses.field(default_factory=list)  # every header found, pinned ones too
    absent: set[str] = dataclasses.field(default_factory=set)  # places searched that held no file
    present: set[str] = dataclasses.field(default_factory=set)  # places where a probe found a file
    line_names: set[str] = dataclasses.field(default_factory=set)  # #line names in headers (not files)
    renaming: set[str] = dataclasses.field(default_factory=set)  # the headers that hold such directives
    line_unknown: bool = False
    unknown: str = ""  # why the superset may miss something ("": it does not)
    clock: str = ""  # where __TIME__ and friends are used ("": nowhere)


class Follower:
    """Builds a :class:`Graph`: :meth:`start` from the source, :meth:`add` each header the trace
    reports that the superset missed, then :meth:`finish`."""

    def __init__(
        self,
        search_dirs: Sequence[str],
        pinned_dirs: Sequence[str],
        defines: Sequence[str],
        is_file: Callable[[str], bool],
        read: Callable[[str], bytes],
        cwd: str = "",
    ) -> None:
        self.search_dirs = list(search_dirs)
        self.cwd = cwd  # where relative names are (the compile's working directory)
        self.pinned = {os.path.abspath(d) for d in pinned_dirs}
        self.pinned_real = tuple(os.path.realpath(d) + os.sep for d in pinned_dirs)
        self.is_file, self.read = is_file, read
        self.graph = Graph()
        self.scans: list[tuple[str | None, _pp.Scan]] = []  # (directory, scan); None: a -D definition
        self.seen: set[str] = set()
        self.pending: list[tuple[_pp.Include, str]] = []  # macro operands not expanded yet
        self.macros: dict[str, list[_pp.Define]] = {}
        for d in defines:
            name, _, value = d.partition("=")
            scan = _pp.scan(f"#define {name.strip()} {value.strip() or '1'}\n")
            self._add(None, scan)
            self._clock(scan, f"-D{name.strip()}")  # -DSTAMP=__TIME__: the source reads the clock through it

    def _add(self, here: str | None, scan: _pp.Scan) -> None:
        self.scans.append((here, scan))
        for define in scan.defines:
            self.macros.setdefault(define.name, []).append(define)

    def visit(self, text: str | bytes, here: str, where: str, header: bool) -> None:
        scan = _pp.scan(text)
        self._add(here, scan)
        # The source is compiled as written: its own #line names are trace names too.
        self.graph.line_names |= scan.line_names
        self.graph.line_unknown |= scan.line_unknown
        if header and (scan.line_names or scan.line_unknown):
            self.graph.renaming.add(where)
        self._clock(scan, where)
        for inc in scan.includes:
            if inc.name is not None:
                self._resolve(inc.name, here, every=inc.directive == "include_next")
            else:
                self.pending.append((inc, here))

    def _clock(self, scan: _pp.Scan, where: str) -> None:
        clock = scan.identifiers.intersection(_pp.CLOCK)
        if clock and not self.graph.clock:
            self.graph.clock = f"{where} uses {sorted(clock)[0]}"

    def start(self, source: str, main_dir: str) -> None:
        self.visit(source, main_dir, "the source", header=False)
        self._expand_pending()

    def add(self, path: str) -> None:
        """A header NVRTC read that the superset did not reach (through a toolkit header, or named
        by a trace event the superset spells differently): recorded, and followed unless pinned."""
        self._found(path, pinned=False)
        self._expand_pending()

    def finish(self) -> Graph:
        self._expand_pending()
        self._probes()
        return self.graph

    def _expand_pending(self) -> None:
        while self.pending:  # macros may be defined in files found later: expand once all are scanned
            pending, self.pending = self.pending, []
            progress = False
            for inc, here in pending:
                names = self._expand(inc.tokens)
                if names is None:
                    self.pending.append((inc, here))
                    continue
                progress = True
                for name in names:
                    self._resolve(name, here, every=True)
            if not progress:
                spelled = " ".join(t.text for t in self.pending[0][0].tokens)
                self.graph.unknown = f"an #include whose operand lazykern cannot expand ({spelled})"
                self.pending = []

    def _resolve(self, spelled: str, here: str, *, every: bool) -> None:
        """Search ``"name"`` / ``<name>`` as NVRTC does; ``every``: record every match, not the first."""
        for place, pinned in self._places(spelled, [here]):
            if not self.is_file(place):
                self.graph.absent.add(place)
                continue
            self._found(place, pinned)
            if not every:
                return

    def _places(self, spelled: str, heres: Sequence[str]) -> list[tuple[str, bool]]:
        name = spelled[1:-1]
        if os.path.isabs(name):
            return [(name, self._is_pinned(name, ""))]
        dirs = ([*heres] if spelled[0] == '"' else []) + self.search_dirs
        return [(os.path.join(d, name), self._is_pinned(os.path.join(d, name), d)) for d in dirs]

    def _is_pinned(self, path: str, directory: str) -> bool:
        return os.path.abspath(directory) in self.pinned if directory else path.startswith(self.pinned_real)

    def _found(self, path: str, pinned: bool) -> None:
        if path in self.seen:
            return
        self.seen.add(path)
        self.graph.files.append(path)
        data = self.read(path)
        if not (pinned or os.path.realpath(os.path.join(self.cwd, path)).startswith(self.pinned_real)):
            self.visit(data, os.path.dirname(path), path, header=True)

    def _expand(self, toks: Sequence[_pp.Token], depth: int = 0) -> list[str] | None:
        """Every header name an include operand can expand to, or None if one cannot be known."""
        if not toks or depth > _DEPTH:
            return None
        first = toks[0]
        if first.kind == "str" and first.text.startswith('"'):
            return [first.text]
        if first.kind != "id" or len(toks) != 1 or first.text not in self.macros:
            return None
        out: list[str] = []
        for define in self.macros[first.text]:
            if define.function_like:
                return None
            if define.text.startswith("<"):
                name = _pp.header_name(define.text, 0)
                if name is None:
                    return None
                out.append(name)
                continue
            names = self._expand(define.body, depth + 1)
            if names is None:
                return None
            out += names
        return out

    def _probes(self) -> None:
        """Every ``__has_include`` probe (and its aliases) in every file scanned, or why not knowable."""
        aliases = {p: p for p in _pp.PROBES}
        changed = True
        while changed:  # #define HI __has_include, #define HJ HI ...
            changed = False
            for name, defines in self.macros.items():
                for d in defines:
                    if not d.function_like and len(d.body) == 1 and d.body[0].text in aliases and name not in aliases:
                        aliases[name] = aliases[d.body[0].text]
                        changed = True
        every_dir = sorted({here for here, _ in self.scans if here is not None})
        if any(s.pastes for _, s in self.scans):
            # A paste's first piece is a proper prefix of what it spells.
            pieces = set().union(*(s.identifiers for _, s in self.scans))
            if any(p.startswith(i) and p != i for p in _pp.PROBES for i in pieces):
                self.graph.unknown = self.graph.unknown or "a ## paste may spell __has_include"
            if any(c.startswith(i) and c != i for c in _pp.CLOCK for i in pieces) and not self.graph.clock:
                self.graph.clock = "a ## paste may spell __TIME__, __DATE__ or __TIMESTAMP__"
        for here, scan in self.scans:
            for toks, in_define, guarded in scan.lines:
                for i, t in enumerate(toks):
                    if t.kind != "id" or t.text not in aliases or guarded or _after_defined(toks, i):
                        continue
                    if in_define and len(toks) == 1:
                        continue  # the alias's own definition
                    operand = _literal_operand(toks, i, scan.text)
                    if operand is None:
                        self.graph.unknown = self.graph.unknown or (
                            f"a {t.text} whose operand or spelling a macro supplies"
                        )
                        continue
                    heres = every_dir if in_define or here is None else [here]
                    self._probe(operand, heres, every=aliases[t.text].endswith("_next"))

    def _probe(self, spelled: str, heres: Sequence[str], *, every: bool) -> None:
        for here in heres or [""]:
            for place, _ in self._places(spelled, [here]):
                if self.is_file(place):
                    self.graph.present.add(place)
                    if not every:
                        break
                else:
                    self.graph.absent.add(place)


def _after_defined(toks: Sequence[_pp.Token], i: int) -> bool:
    """``defined X`` / ``defined ( X )``: the name is asked about, not expanded."""
    if i >= 1 and toks[i - 1].text == "defined":
        return True
    return i >= 2 and toks[i - 1].text == "(" and toks[i - 2].text == "defined"


def _literal_operand(toks: Sequence[_pp.Token], i: int, text: str) -> str | None:
    """``( "x" )`` or ``( <x> )`` right after ``toks[i]``: the header name, else None."""
    if i + 2 >= len(toks) or toks[i + 1].text != "(":
        return None
    operand = toks[i + 2]
    if operand.kind == "str" and operand.text.startswith('"'):
        close = i + 3
        name: str | None = operand.text
    elif operand.text == "<":
        name = _pp.header_name(text, operand.start)
        if name is None:
            return None
        close = next((j for j in range(i + 3, len(toks)) if toks[j].start >= operand.start + len(name)), len(toks))
    else:
        return None
    return name if close < len(toks) and toks[close].text == ")" else None

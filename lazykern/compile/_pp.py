"""What the C preprocessor will see in a file: translation phases 1-3, then its directives as tokens.

The header manifest (``_manifest``) takes what NVRTC read from NVRTC's own trace; what the trace does
not say (which ``__has_include`` probes ran, which ``#line`` names are not files, what a header whose
events the trace misnames includes) is taken from this model, never from a pattern on raw text:

* phase 1: ``\\r\\n`` is a newline (C++17 has no trigraphs);
* phase 2: every backslash-newline is deleted (NVRTC splices nothing else: a backslash followed by
  blanks and a newline is not a splice, checked against NVRTC 13.5);
* phase 3: the text becomes tokens; a comment is one space (a block comment spanning lines keeps a
  directive going), string, character and raw string literals are single tokens.

:func:`scan` then reads each logical line that starts with ``#`` (or ``%:``) as a directive and every
other line as code, and reports what a key needs: includes with their operand, object-like and
function-like macro definitions, ``#line`` names, identifiers, and whether ``##`` pastes anything.
Macro expansion is left to the caller (:mod:`._include_graph`), which sees every file's definitions.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import NamedTuple

PROBES = ("__has_include", "__has_include_next")
CLOCK = ("__TIME__", "__DATE__", "__TIMESTAMP__")


class Token(NamedTuple):
    kind: str  # "id", "num", "str", "chr", "punct", "other", "nl"
    text: str
    start: int  # offset in the phase-2 text (for header names, which are lexed from it directly)


@dataclasses.dataclass(frozen=True)
class Include:
    directive: str  # "include", "include_next" or "import"
    name: str | None  # '"x.h"' or '<x.h>' as written, or None: the operand is macro tokens
    tokens: tuple[Token, ...]  # the operand's tokens (for a macro operand)


@dataclasses.dataclass(frozen=True)
class Define:
    name: str
    function_like: bool
    body: tuple[Token, ...]
    text: str  # the body's phase-3 text, for header names lexed out of an expansion


@dataclasses.dataclass
class Scan:
    """What one file holds for the preprocessor (see the module's docstring)."""

    includes: list[Include] = dataclasses.field(default_factory=list)
    defines: list[Define] = dataclasses.field(default_factory=list)
    line_names: set[str] = dataclasses.field(default_factory=set)
    line_unknown: bool = False  # a #line whose operand is not a literal (a macro expands to it)
    # Every logical line's tokens, ``in_define`` marking a #define's body, ``guarded`` a line where an
    # identifier only names a macro (#ifdef, #ifndef, #undef): probes are read from these once every
    # file's aliases are known.
    lines: list[tuple[tuple[Token, ...], bool, bool]] = dataclasses.field(default_factory=list)
    identifiers: set[str] = dataclasses.field(default_factory=set)
    pastes: bool = False
    text: str = ""  # the phase-2 text (token offsets point into it)


@functools.cache
def _lexer() -> re.Pattern[str]:
    """One token per match (blanks and comments too); compiled on the first cold compile, never on a warm hit."""
    return re.compile(
        r"""(?P<nl>\n)
        |(?P<ws>[ \t\f\v\r]+)
        |(?P<lc>//[^\n]*)
        |(?P<bc>/\*(?:[^*]|\*(?!/))*(?:\*/|\Z))
        |(?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\ \t\n"]{0,16})\((?:.*?\)(?P=delim)"|.*\Z))
        |(?P<str>(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"?)
        |(?P<chr>(?:u8|[uUL])?'(?:\\.|[^'\\\n])*'?)
        |(?P<id>[^\W\d]\w*|\$[\w$]*)
        |(?P<num>\.?\d(?:[eEpP][+-]|[\w.']|)*)
        |(?P<punct>%:%:|\#\#|%:|\#|\.\.\.|<<=|>>=|->\*?|::|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\+\+|--|<:|:>|<%|%>)
        |(?P<other>.)""",
        re.X | re.S,
    )


_DROPPED = frozenset(("ws", "lc", "bc"))


def phases_1_2(text: str) -> str:
    """Newlines made one character, then every line splice (backslash-newline) deleted."""
    return text.replace("\r\n", "\n").replace("\\\n", "")


@functools.lru_cache(maxsize=4)
def tokens(text: str) -> tuple[Token, ...]:
    """Phase 3 over phase-2 text: tokens and newlines ("nl"); comments and blanks are dropped (a block
    comment is one space, even across lines: the directive it sits in goes on). Raw string literals
    are one token. The last few texts are remembered (the source is scanned twice per compile)."""
    out = []
    for m in _lexer().finditer(text):
        kind = m.lastgroup or "other"  # every alternative is named: never None
        if kind not in _DROPPED:
            out.append(Token("str" if kind == "raw" else kind, m.group(), m.start()))
    return tuple(out)


def _logical_lines(toks: tuple[Token, ...]) -> list[list[Token]]:
    lines: list[list[Token]] = [[]]
    for t in toks:
        if t.kind == "nl":
            lines.append([])
        else:
            lines[-1].append(t)
    return [line for line in lines if line]


def unescape(literal: str) -> str | None:
    """The characters of a plain ``"..."`` literal (as ``#line`` names them), or None for another literal."""
    if not (literal.startswith('"') and literal.endswith('"') and len(literal) >= 2):
        return None
    body, out, i = literal[1:-1], [], 0
    simple = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "?": "?", "a": "\a", "b": "\b", "f": "\f"}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt in ("v", "r"):
            out.append("\v" if nxt == "v" else "\r")
            i += 2
        else:
            return None  # octal, hex, universal names: not worth modelling, the caller is conservative
    return "".join(out)


def scan(data: bytes | str) -> Scan:
    """What the preprocessor sees in one file (see the module's docstring)."""
    text = phases_1_2(data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data)
    out = Scan(text=text)
    for line in _logical_lines(tokens(text)):
        for t in line:
            if t.kind == "id":
                out.identifiers.add(t.text)
            elif t.kind == "punct" and t.text in ("##", "%:%:"):
                out.pastes = True
        if line[0].text not in ("#", "%:"):
            out.lines.append((tuple(line), False, False))
            continue
        name = line[1].text if len(line) > 1 and line[1].kind in ("id", "num") else ""
        rest = tuple(line[2:])
        if name in ("include", "include_next", "import"):
            out.includes.append(_include(name, rest, text))
        elif name == "define" and rest and rest[0].kind == "id":
            macro = rest[0]
            function_like = len(rest) > 1 and rest[1].text == "(" and rest[1].start == macro.start + len(macro.text)
            body = rest[1:]
            if function_like:
                close = next((i for i, t in enumerate(body) if t.text == ")"), len(body) - 1)
                body = body[close + 1 :]
            body_text = text[body[0].start : body[-1].start + len(body[-1].text)] if body else ""
            out.defines.append(Define(macro.text, function_like, body, body_text))
            out.lines.append((body, True, False))
        elif name == "line" or line[1].kind == "num":
            operands = rest if name == "line" else tuple(line[1:])
            _line(operands, out)
        else:
            out.lines.append((rest, False, name in ("ifdef", "ifndef", "undef")))
    return out


def _include(directive: str, rest: tuple[Token, ...], text: str) -> Include:
    if rest and rest[0].kind == "str" and rest[0].text.startswith('"'):
        return Include(directive, rest[0].text, rest)
    if rest and rest[0].text == "<":
        name = header_name(text, rest[0].start)
        if name is not None:
            return Include(directive, name, rest)
    return Include(directive, None, rest)


def header_name(text: str, start: int) -> str | None:
    """The ``<...>`` header name starting at ``text[start]``, or None if the line ends first."""
    close = text.find(">", start)
    newline = text.find("\n", start)
    if close < 0 or (0 <= newline < close):
        return None
    return text[start : close + 1]


def _line(operands: tuple[Token, ...], out: Scan) -> None:
    """``#line N "name"`` / ``# N "name" flags``: the name, or "unknown" when a macro supplies it."""
    if not operands or operands[0].kind != "num":
        out.line_unknown = True
        return
    if len(operands) == 1:
        return  # a line number only: no file name
    name = unescape(operands[1].text) if operands[1].kind == "str" else None
    if name is None:
        out.line_unknown = True
    else:
        out.line_names.add(name)

"""Every header name a file may look up, over-approximated: a scan that can only add candidates.

NVRTC reports the headers it opened but not the lookups that failed, nor ``__has_include`` probes.
Those are taken from the files the compile read, and a model of the preprocessor that decides a
directive is inside a string or a comment can be wrong (a line splice inside a raw string, a
trigraph ``??/`` under ``-std=c++14``, both seen in hostile rounds). So this scan models nothing:
it reads each file as several texts (as written; with line splices removed; with trigraphs
replaced, then splices removed) and takes every ``include``/``include_next``/``import`` followed by
a header name and every ``__has_include``/``__has_include_next`` (or an object-like alias of one)
followed by ``(`` and a header name, wherever it appears: in code, strings or comments alike. A
candidate too many costs a ``stat`` at lookup; a candidate missed would serve a stale binary.

A probe whose operand is not a literal header name (a macro supplies it) cannot be followed: it is
reported in :attr:`Candidates.unknown` (the compile stays in memory), as is a clock macro
(``__TIME__``, ``__DATE__``, ``__TIMESTAMP__``) anywhere in a user's file.
"""

from __future__ import annotations

import dataclasses
import functools
import re

_TRIGRAPHS = {"=": "#", "/": "\\", "'": "^", "(": "[", ")": "]", "!": "|", "<": "{", ">": "}", "-": "~"}
_GAP = r"(?:\s|/\*.*?\*/|\\\n)*"  # blanks, block comments and splices that may sit between the pieces
_NAME = r"(<[^<>\n]*>|\"[^\"\n]*\")"
CLOCK = ("__TIME__", "__DATE__", "__TIMESTAMP__")


@dataclasses.dataclass
class Candidates:
    """What :func:`scan` found in one file; header names as written (``"x.h"`` or ``<x.h>``)."""

    includes: set[tuple[bool, str]] = dataclasses.field(default_factory=set)  # (is a *_next, name)
    probes: set[tuple[bool, str]] = dataclasses.field(default_factory=set)  # (is a *_next, name)
    unknown: str = ""  # why a lookup of this file cannot be known ("": every one is a candidate)
    clock: str = ""  # the clock macro named in it ("": none)


_WORD = re.compile(r"[\w$]")


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Compiled on the first cold compile that needs them, never on a warm hit. Keywords are found
    first (a literal search, fast over megabytes of toolkit headers), the rest matched where one is."""
    probe_word = re.compile(r"__has_include(?:_next)?")
    after_include = re.compile(rf"{_GAP}{_NAME}", re.S)
    after_probe = re.compile(rf"{_GAP}\({_GAP}{_NAME}?", re.S)
    alias_head = re.compile(rf"define{_GAP}([A-Za-z_$][\w$]*){_GAP}$", re.S)
    define_head = re.compile(rf"define{_GAP}$", re.S)
    return probe_word, after_include, after_probe, alias_head, define_head


@functools.lru_cache(maxsize=64)
def _keywords(aliases: frozenset[str]) -> re.Pattern[str]:
    words = sorted({"include_next", "include", "import", *aliases}, key=len, reverse=True)
    return re.compile("|".join(re.escape(w) for w in words))


def _alone(view: str, start: int, end: int) -> bool:
    """The match is a whole identifier (not part of a longer one)."""
    return not (start > 0 and _WORD.match(view, start - 1)) and not _WORD.match(view, end)


def views(text: str) -> list[str]:
    """The texts a directive may be read from: as written, spliced, trigraphs replaced and spliced."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    spliced = re.sub(r"\\[ \t\f\v]*\n", "", text)
    out = [text, spliced]
    if "??" in text:
        replaced = re.sub(r"\?\?([=/'()!<>\-])", lambda m: _TRIGRAPHS[m.group(1)], text)
        out.append(re.sub(r"\\[ \t\f\v]*\n", "", replaced))
    return out


def scan(data: bytes | str, *, clock: bool = True) -> Candidates:
    """Every lookup ``data`` may make (see the module). ``clock``: report clock macros (user files)."""
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    probe_word, after_include, after_probe, alias_head, define_head = _patterns()
    out = Candidates()
    texts = views(text)
    nexts = {"__has_include": False, "__has_include_next": True}  # probe spellings: a *_next or not
    for view in texts:
        for m in probe_word.finditer(view):
            if not _alone(view, m.start(), m.end()):
                continue
            alias = alias_head.search(view, max(0, m.start() - 256), m.start())
            if alias is not None and not after_probe.match(view, m.end()):
                nexts[alias.group(1)] = m.group().endswith("_next")  # #define HI __has_include
    keywords = _keywords(frozenset(nexts))
    for view in texts:
        for m in keywords.finditer(view):
            word = m.group()
            if not _alone(view, m.start(), m.end()):
                continue
            if word in nexts:
                call = after_probe.match(view, m.end())
                if call is None:
                    continue  # ``defined(__has_include)``, ``#ifdef __has_include``: asked about, not called
                if call.group(1) is not None:
                    out.probes.add((nexts[word], call.group(1)))
                elif not out.unknown and not define_head.search(view, max(0, m.start() - 64), m.start()):
                    # ``#define __has_include(x) 0`` (a fallback) names no header; any other call does.
                    out.unknown = f"a {word} whose operand a macro supplies"
                continue
            operand = after_include.match(view, m.end())
            if operand is not None:
                out.includes.add((word == "include_next", operand.group(1)))
        if clock and not out.clock:
            found = re.search("|".join(CLOCK), view)
            if found:
                out.clock = found.group()
    return out

"""Text only: a shared preamble plus named fragments -> one translation unit each.

Nothing here compiles; it decides *what* would be compiled, which is what the
cache key is derived from.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..config import invalid_value

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_SYMBOL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Generate = Callable[[str], "tuple[str, Iterable[str] | None] | None"]
"""name -> (code, signature) of a fragment generated on request, or None: not one of its names."""


@dataclasses.dataclass(frozen=True)
class Fragment:
    """One instantiation: its code, the ``extern "C"`` kernel it defines, and the
    argument types that kernel takes (``"ptr"`` for a device pointer, or a
    NumPy dtype name such as ``"int32"``; None to infer them at launch)."""

    name: str
    code: str
    symbol: str
    signature: tuple[str, ...] | None = None
    options: tuple[str, ...] = ()


class FamilySource:
    """A preamble and the fragments that instantiate it.

    >>> fs = FamilySource("demo", "#define ONE 1\\n")
    >>> _ = fs.add("k", 'extern "C" __global__ void k(int *a) { *a = ONE; }')
    >>> fs.translation_unit("k").count("ONE")
    2
    """

    def __init__(self, name: str, preamble: str = "", options: Sequence[str] = ()) -> None:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"family name must be an identifier-like string, got {name!r}")
        if not isinstance(preamble, str):
            raise TypeError(f"preamble must be str, got {type(preamble).__name__}")
        self.name = name
        self.preamble = preamble
        self.options = _as_options(options)
        self.fragments: dict[str, Fragment] = {}
        self._generators: list[tuple[Generate, Callable[[], Iterable[str]]]] = []

    def add(
        self,
        name: str,
        code: str,
        *,
        symbol: str | None = None,
        signature: Iterable[str] | None = None,
        options: Sequence[str] = (),
    ) -> Fragment:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"fragment name must be an identifier-like string, got {name!r}")
        if not isinstance(code, str):
            raise TypeError(f"fragment {name!r}: code must be str, got {type(code).__name__}")
        symbol = symbol or name
        if not _SYMBOL_RE.match(symbol):
            raise ValueError(f"fragment {name!r}: kernel symbol must be a C identifier, got {symbol!r}")
        if name in self.fragments and self.fragments[name].code != code:
            raise ValueError(f"fragment {name!r} is already defined in family {self.name!r} with other code")
        frag = Fragment(name, code, symbol, check_signature(name, signature), _as_options(options))
        self.fragments[name] = frag
        return frag

    def update(self, fragments: Mapping[str, str]) -> None:
        for name, code in fragments.items():
            self.add(name, code)

    def add_generator(self, generate: Generate, names: Callable[[], Iterable[str]]) -> None:
        """Fragments made on request: ``generate(name)`` gives (code, signature) or None, and
        ``names()`` lists every name it answers. A generated fragment is kept once made."""
        self._generators.append((generate, names))

    def names(self) -> list[str]:
        """Added fragments, then every generator's names, without repeats."""
        out = dict.fromkeys(self.fragments)
        for _, listed in self._generators:
            out.update(dict.fromkeys(listed()))
        return list(out)

    def fragment(self, name: str) -> Fragment:
        frag = self.fragments.get(name)
        if frag is not None:
            return frag
        for generate, _ in self._generators:
            made = generate(name)
            if made is not None:
                code, signature = made
                return self.add(name, code, signature=signature)
        known = ", ".join(sorted(self.names())[:10]) or "none"
        raise KeyError(f"family {self.name!r} has no kernel {name!r} (known: {known})")

    def translation_unit(self, name: str) -> str:
        """Preamble + the one fragment: exactly what NVRTC sees for ``name``.

        ``#line`` directives make NVRTC report a fragment's lines as
        ``fragment-name(3)`` and the preamble's as ``family-preamble(12)``.
        """
        frag = self.fragment(name)
        return f"{self._preamble_lines()}{_line_marker(frag.name)}{frag.code}\n"

    def all_in_one(self, names: Iterable[str] | None = None) -> str:
        """Every fragment (or those named) in one unit: what an eager library compiles at start-up."""
        chosen = [self.fragment(n) for n in (self.names() if names is None else names)]
        return self._preamble_lines() + "".join(f"{_line_marker(f.name)}{f.code}\n" for f in chosen)

    def _preamble_lines(self) -> str:
        return f"{_line_marker(self.name + '-preamble')}{self.preamble}\n"

    def options_for(self, name: str) -> tuple[str, ...]:
        return self.options + self.fragment(name).options


def _line_marker(file: str) -> str:
    # Names are identifier-like (checked on add), so they need no quoting inside the directive.
    return f'#line 1 "{file}"\n'


_SCALAR_KINDS = "biuf"  # bool, signed and unsigned integers, floats: what a kernel parameter can be by value
SIGNATURE_TYPES = "'ptr' (a device pointer) or a NumPy scalar type name such as int32, int64, uint32, float32, float64"


def check_signature(name: str, signature: Iterable[str] | None) -> tuple[str, ...] | None:
    """A fragment's signature as a tuple, each entry checked when it is registered, not at compile or launch.

    >>> check_signature("k", ["ptr", "int32"])
    ('ptr', 'int32')
    """
    if signature is None:
        return None
    if isinstance(signature, (str, bytes)):
        raise TypeError(f"fragment {name!r}: signature must be a list such as ['ptr', 'int32'], not one string")
    out = tuple(signature)
    for i, entry in enumerate(out):
        if entry == "ptr":
            continue
        if not (isinstance(entry, str) and _scalar_name(entry)):
            raise ValueError(f"fragment {name!r}: {invalid_value(f'signature[{i}]', entry, SIGNATURE_TYPES)}")
    return out


@functools.cache
def _scalar_name(entry: str) -> bool:
    """Whether ``entry`` names a NumPy scalar type a kernel takes by value (parsing a dtype name costs
    microseconds, and a generated family registers hundreds of fragments of a few signatures)."""
    import numpy as np  # import on first use: startup time

    try:
        return np.dtype(entry).kind in _SCALAR_KINDS
    except TypeError:
        return False


def _as_options(options: Sequence[str]) -> tuple[str, ...]:
    if isinstance(options, (str, bytes)):
        raise TypeError("options must be a list of strings such as ['-std=c++17'], not one string")
    out = tuple(options)
    for o in out:
        if not isinstance(o, str):
            raise TypeError(f"compile options must be strings, got {type(o).__name__} ({o!r})")
    return out

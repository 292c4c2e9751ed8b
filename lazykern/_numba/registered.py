"""Which user registrations a ``@lazy_kernel`` compile could have used, checked on load (issue 43.4).

The manifest (:mod:`.resolved`) checks the code of the functions a compile resolved. Typing and
lowering also pick implementations out of Numba's registries (:mod:`.registries`): a cast, a
constant, a getattr, a data model, a ``typeof``. Which one they pick is decided by the types and
callables involved, so the manifest keeps the compile's *world*:

- ``types``: every class (with its bases) of every Numba type the compile used — the typemaps, the
  call signatures, the types nested in them, and the members of their data models;
- ``keys``: every callable typing or lowering was keyed by (a function, a class, ``operator.add``);
- ``values``: the classes (with their bases) of the values Numba froze into the code (``typeof``).

A registration applies to the kernel when each callable it is keyed by is in ``keys`` (a name such
as ``"getitem"`` always applies) and each type it is registered for is in ``types`` (a type
instance stands for its class: more is included, never less). The manifest lists, in registry
order, every user registration that applies, with a digest of what it registers (a user
function's code as :mod:`.key` digests a kernel; Numba's wrappers by name and by what their
closures hold: ``make_attribute_wrapper``'s member name; a template or data model class by its
methods and plain attributes). A load walks the same registries, keeps what applies to the
recorded world and compares the lists: no typing, and after the first load of a process only
the registrations added since are read.
"""

from __future__ import annotations

import hashlib
import sys
import types as pytypes
from typing import Any

from . import key, registries
from .registries import Registration

# Template attributes that are per-process caches (compiled overloads), not what was registered.
_CACHES = ("cache", "compiled", "_overloads", "_abc_impl", "__abstractmethods__", "__doc__", "__module__")


class World:
    """The types, callables and frozen values' classes one compile (with its callees) used."""

    def __init__(self, model_of: Any = None) -> None:
        self.types: set[str] = set()
        self.keys: set[str] = set()
        self.values: set[str] = set()
        self._model_of = model_of  # Numba type -> its data model (the compile's manager), or None
        self._seen: dict[int, Any] = {}  # id -> object (kept alive so that ids stay unique)

    def add_type(self, t: Any, depth: int = 0) -> None:
        """A Numba type, the types nested in it and its data model's members."""
        if not registries.is_numba_type(t) or id(t) in self._seen or depth > 32:
            return
        self._seen[id(t)] = t
        self.types.update(registries.ident(cls) for cls in type(t).__mro__[:-1])
        for v in list(vars(t).values()):
            for item in _items(v):
                self.add_type(item, depth + 1)
        members = None
        if self._model_of is not None:
            try:
                members = getattr(self._model_of(t), "_members", None)
            except Exception:  # no model (a typing-only type): nothing is laid out for it
                members = None
        for m in members if isinstance(members, tuple) else ():
            self.add_type(m, depth + 1)

    def add_key(self, k: Any) -> None:
        """A callable typing or lowering was keyed by (a method's ``(type, name)`` too)."""
        for part in k if isinstance(k, tuple) else (k,):
            if part is None or isinstance(part, str):
                continue
            if _is_type_class(part):
                self.types.update(registries.ident(cls) for cls in part.__mro__[:-1])
            else:
                self.add_type(part)
                self.keys.add(registries.ident(part))

    def add_value(self, v: Any) -> None:
        """A value Numba froze into the code (typed by ``typeof``, maybe a callable it keyed by)."""
        self.values.update(registries.ident(cls) for cls in type(v).__mro__[:-1])
        if callable(v):
            self.add_key(v)

    def as_json(self) -> dict[str, list[str]]:
        return {"types": sorted(self.types), "keys": sorted(self.keys), "values": sorted(self.values)}


def record(world: World, typing_context: Any, target_context: Any, *, lines: bool) -> tuple[dict[str, Any], str]:
    """The manifest section for one compile, and why it cannot be verified in a new process ("")."""
    containers, unnamed = registries.consulted(typing_context, target_context)
    names, missing = registries.names_of(containers)
    recorded = world.as_json()
    section: dict[str, Any] = {"world": recorded, "registries": names}
    section["registered"] = _applying(containers, names, recorded, lines)
    why = "; ".join(unnamed + missing)
    return section, (f"{why}, consulted by the compile, cannot be found again by name" if why else "")


def verify(section: Any, *, lines: bool) -> str | None:
    """``None`` when the user registrations that apply to the recorded world are unchanged."""
    world, names, held = section["world"], section["registries"], section["registered"]
    containers = _found(names)
    for reg in registries.live_registries():  # one a user installed since: walked too
        if all(reg is not c for c in containers):
            containers = [*containers, reg]
    now = _applying(containers, names, world, lines)
    if now == held:
        return None
    return f"the user registrations Numba's registries hold for this kernel changed: {_first_change(held, now)}"


# Every manifest names the same registries: found once per set of loaded modules.
_found_memo: dict[tuple[tuple[str, ...], ...], tuple[int, list[Any]]] = {}


def _found(names: list[list[str]]) -> list[Any]:
    wanted = tuple(tuple(alternatives) for alternatives in names)
    known = _found_memo.get(wanted)
    if known is None or known[0] != len(sys.modules):  # a module imported since may hold one
        known = _found_memo[wanted] = (len(sys.modules), registries.find(names))
    return known[1]


def _applying(containers: list[Any], names: list[list[str]], world: dict[str, list[str]], lines: bool) -> list[Any]:
    """Every user registration that applies to ``world``, described, in a stable order: by place
    and key, registration order kept among those with the same keys (they may compete)."""
    types, keys, values = set(world["types"]), set(world["keys"]), set(world["values"])
    regs = registries.user_registrations(containers, registries.name_map(containers, names), registries.wanted(world))
    picked = [r for r in regs if _applies(r, types, keys, values)]
    described = [[r.place, list(r.keys), list(r.formals), _digest(r, lines)] for r in picked]
    return sorted(described, key=lambda d: (d[0], d[1], d[2]))  # stable: registration order kept


def _applies(r: Registration, types: set[str], keys: set[str], values: set[str]) -> bool:
    for k in r.keys:
        if not k.startswith("'") and k not in keys:
            return False
    for f in r.formals:
        kind, _, name = f.partition(":")
        if f != "*" and name not in (types if kind == "type" else values):
            return False
    return True


def _first_change(held: list[Any], now: list[Any]) -> str:
    for before, after in zip(held, now):
        if before != after:
            return f"{before[0]} {before[1] or before[2]}"
    longer = held if len(held) > len(now) else now
    extra = longer[min(len(held), len(now))]
    return f"{extra[0]} {extra[1] or extra[2]} {'is gone' if longer is held else 'is new'}"


# -- what a registration registers, as a digest ---------------------------------------------------
_digests: dict[tuple[int, bool], tuple[Registration, str]] = {}


def _digest(r: Registration, lines: bool) -> str:
    memo = _digests.get((id(r), lines))
    if memo is None or memo[0] is not r:
        text = repr(_describe(r.impl, lines, 0, set()))
        memo = _digests[(id(r), lines)] = (r, hashlib.sha256(text.encode()).hexdigest())
    return memo[1]


def _describe(obj: Any, lines: bool, depth: int, path: set[int]) -> Any:
    """``obj`` as plain data, a function of the program: user functions by their code's digest,
    Numba's by name and what their closures hold, classes by their methods and plain attributes."""
    if depth > 8 or id(obj) in path:
        return "<cycle or deep>"
    if obj is None or type(obj) in (bool, int, float, complex, str, bytes):
        return obj
    if isinstance(obj, (staticmethod, classmethod)):
        return ["method", _describe(obj.__func__, lines, depth + 1, path)]
    if isinstance(obj, property):
        return ["property", _describe(obj.fget, lines, depth + 1, path)]
    path = path | {id(obj)}
    if isinstance(obj, pytypes.FunctionType):
        if registries.user_function(obj, in_numba=depth > 0):
            return ["function", registries.ident(obj), key.function_digest_memo(obj, lines)]
        cells = [_describe(_cell(c), lines, depth + 1, path) for c in obj.__closure__ or ()]
        wrapped = _describe(getattr(obj, "__wrapped__", None), lines, depth + 1, path)
        return ["numba function", registries.ident(obj), cells, wrapped]
    if isinstance(obj, type):
        if _is_type_class(obj) or (depth > 0 and not _walk_class(obj)):
            return ["class", registries.ident(obj)]
        bases = [_describe(b, lines, depth + 1, path) for b in obj.__bases__ if b is not object]
        attrs = [
            [name, _describe(v, lines, depth + 1, path)]
            for name, v in sorted(vars(obj).items())
            if not any(c in name for c in _CACHES)
        ]
        return ["class", registries.ident(obj), bases, attrs]
    if _is_numba_type(obj):
        templates = getattr(obj, "templates", None)  # a typing global's Function type: its templates
        if isinstance(templates, (tuple, list)):
            return ["templates", [_describe(t, lines, depth + 1, path) for t in templates]]
        return key.describe_type(obj)
    if isinstance(obj, (tuple, list, set, frozenset)):
        items = [_describe(x, lines, depth + 1, path) for x in obj]
        return sorted(items, key=repr) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, dict):
        return [
            [repr(_describe(k, lines, depth + 1, path)), _describe(v, lines, depth + 1, path)] for k, v in obj.items()
        ]
    if isinstance(obj, pytypes.ModuleType):
        return ["module", obj.__name__]
    if registries.user_module(type(obj).__module__):  # a user's object: by content, as the key hashes values
        return ["value", registries.ident(type(obj)), key.value_digest(obj, lines=lines)]
    inner = [getattr(obj, a, None) for a in ("__wrapped__", "_imp", "func", "_defn", "py_func")]
    held = [_describe(i, lines, depth + 1, path) for i in inner if i is not None]
    return ["object", registries.ident(type(obj)), held]


def _walk_class(cls: type) -> bool:
    """A class read by its attributes: a user's, or one Numba made around user code (a template)."""
    return registries.user_module(cls.__module__) or "<locals>" in cls.__qualname__ or "_overload_func" in vars(cls)


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return "<empty cell>"


def _items(v: Any) -> list[Any]:
    if isinstance(v, (tuple, list)):
        return list(v)
    if isinstance(v, dict):
        return list(v.values())
    return [v]


def _is_numba_type(v: Any) -> bool:
    return registries.is_numba_type(v)


def _is_type_class(v: Any) -> bool:
    return registries.is_numba_type_class(v)

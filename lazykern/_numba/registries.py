"""Every registry Numba keeps, walked for the registrations user code made (issue 43.4).

A registration decides a binary as much as the kernel's code does: a ``lower_cast`` edited from
``add`` to ``mul``, a ``make_attribute_wrapper`` re-pointed to another member, a data model whose
members changed order. Numba keeps them in a few kinds of containers, and this module walks each
container as a whole, never a list of which ones matter:

- registries (numba's and numba-cuda's ``Registry`` classes): every list they hold — typing
  templates (``functions``, ``attributes``, ``globals``) and lowering tables (``functions``,
  ``getattrs``, ``setattrs``, ``casts``, ``constants``, and any list a later Numba adds);
- data model managers: their handler table (type class -> model);
- single-dispatch functions (``typeof_impl``): their table (Python class -> implementation).

Which containers a compile consulted comes from the compile itself: the registries its typing and
target contexts installed and the managers its data model manager chains (:func:`consulted`), plus
the single-dispatch tables of Numba's modules (``typeof``). Each is named by where a new process
finds it again (``module:attribute``), without typing or importing anything.

A registration is the user's when its implementation holds user code (a function of a module
outside numba / numba-cuda / llvmlite / numpy / lazykern, at any depth of Numba's wrappers) or
it is keyed by a user object (a type class, a function): ``make_attribute_wrapper`` registers
Numba's own closures keyed by the user's type class. Numba's own registrations are pinned by the
versions in the key and left out.
"""

from __future__ import annotations

import sys
import types as pytypes
from collections.abc import Iterable
from typing import Any, NamedTuple

from . import key

# Where user code is never: the pinned libraries and lazykern itself.
_NOT_USER = ("numba", "numba_cuda", "llvmlite", "numpy", "cuda", "lazykern", "builtins", "operator", "_operator")


class Registration(NamedTuple):
    """One entry of a registry: where it is (``module:attribute.list``), what it is keyed by
    (callables and names), which types it applies to (``"type:"`` / ``"value:"`` class names, or
    ``"*"``), and the object whose behaviour it registers."""

    place: str
    keys: tuple[str, ...]
    formals: tuple[str, ...]
    impl: Any


def user_module(module: Any) -> bool:
    """Whether ``module`` (a module name) is user code: not a pinned library's, not lazykern's,
    not Python's own (``math.sin`` keys Numba's registrations)."""
    if not isinstance(module, str):
        return False
    top = module.split(".", 1)[0]
    return top not in _NOT_USER and top not in sys.stdlib_module_names


def ident(obj: Any) -> str:
    """``module:qualname`` of a class or function (of its class for other objects), the same in
    every process: never an address or a counter."""
    if isinstance(obj, str):
        return repr(obj)
    named = obj if isinstance(obj, (type, pytypes.FunctionType, pytypes.BuiltinFunctionType)) else None
    if named is None and isinstance(getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None), str):
        named = obj  # a callable object that names itself (an @intrinsic, a ufunc, a dispatcher)
    if named is None:
        cls = type(obj)
        return f"{cls.__module__}:{cls.__qualname__}()"
    name = getattr(named, "__qualname__", None) or getattr(named, "__name__", None)
    module = getattr(named, "__module__", None)
    if module is None and type(named).__name__ == "ufunc":
        module = "numpy"
    return f"{module}:{name}"


# -- what a compile consulted, by name ------------------------------------------------------------
def consulted(typing_context: Any, target_context: Any) -> tuple[list[Any], list[str]]:
    """The containers a compile's contexts consult, and why a new process could not find one.

    Typing and lowering read the registries their contexts installed; the target context's data
    model manager chains the handler tables of module-level managers; ``typeof`` dispatches on the
    single-dispatch tables of Numba's modules."""
    found: list[Any] = []
    for ctx in (typing_context, target_context):
        for reg in list(getattr(ctx, "_registries", {}) or {}):
            if all(reg is not f for f in found):
                found.append(reg)
    handlers = getattr(getattr(target_context, "data_model_manager", None), "_handlers", None)
    maps = list(getattr(handlers, "maps", [handlers] if handlers is not None else []))
    owners = {id(getattr(obj, "_handlers", None)): obj for obj in _numba_objects().values()}
    unnamed: list[str] = []
    for table in maps:
        owner = owners.get(id(table))
        if owner is None:
            unnamed.append("a data model manager of the CUDA target")
        elif all(owner is not f for f in found):
            found.append(owner)
    for obj in list(_numba_objects().values()):
        if _kind(obj) == "dispatch" and all(obj is not f for f in found):
            found.append(obj)
    return found, unnamed


def names_of(containers: Iterable[Any]) -> tuple[list[list[str]], list[str]]:
    """Each container's names (``module:attribute``, every one it has in a loaded module, sorted),
    and what has none (a registry a user installed that no module holds: not findable again)."""
    by_id = _names_by_id()
    out: list[list[str]] = []
    missing: list[str] = []
    for obj in containers:
        names = by_id.get(id(obj))
        if names is None:
            names = _names_in_all_modules(obj)
        if names:
            out.append(sorted(names))
        else:
            missing.append(f"a {type(obj).__qualname__} ({getattr(obj, 'name', '?')}) no module holds")
    return sorted(out), missing


def find(names: list[list[str]]) -> list[Any]:
    """The containers by name, from loaded modules only: a module nobody imported holds nothing a
    user registered (and importing it would cost a warm load)."""
    out: list[Any] = []
    seen: set[int] = set()
    for alternatives in names:
        for name in alternatives:
            module, _, attr = name.partition(":")
            obj = getattr(sys.modules.get(module), attr, None)
            if obj is not None and _kind(obj):
                if id(obj) not in seen:
                    seen.add(id(obj))
                    out.append(obj)
                break
    return out


def live_registries() -> list[Any]:
    """The registries the CUDA contexts hold now, where they exist already (never created here)."""
    target = getattr(sys.modules.get("numba.cuda.descriptor"), "cuda_target", None)
    out: list[Any] = []
    for attr in ("_typingctx", "_targetctx"):
        ctx = getattr(target, attr, None)
        out += list(getattr(ctx, "_registries", {}) or {})
    return out


# -- walking ----------------------------------------------------------------------------------------
def user_registrations(
    containers: Iterable[Any], names: dict[int, str], wanted: set[str] | None = None
) -> list[Registration]:
    """The user's registrations in ``containers``, in each container's order (``names``: id ->
    the name a registration's ``place`` starts with). With ``wanted`` (:func:`wanted`), only
    those that may apply to that world: a superset of what applies, read without looking at the
    thousands of Numba's own registrations that cannot."""
    out: list[Registration] = []
    for obj in containers:
        name = names.get(id(obj), f"<{type(obj).__qualname__}>")
        kind = _kind(obj)
        if kind == "registry":
            for attr in sorted(vars(obj)):
                table = vars(obj)[attr]
                if isinstance(table, list):
                    out += _list_entries(table, f"{name}.{attr}", wanted)
        elif kind == "models":
            out += _dict_entries(obj._handlers, f"{name}._handlers", "type")
        elif kind == "dispatch":
            out += _dict_entries(obj.registry, f"{name}.registry", "value")
    return out


def wanted(world: dict[str, list[str]]) -> set[str]:
    """What a registration may require (:func:`_requirement`) to apply to ``world``."""
    out = {"always"}
    out.update(f"key:{k}" for k in world["keys"])
    out.update(f"type:{t}" for t in world["types"])
    out.update(f"value:{v}" for v in world["values"])
    return out


# A list is appended to only (Numba's registry loaders read them by position): indexed once per
# process up to its length, each entry under one thing it requires to apply (a callable it is
# keyed by, a type it is registered for). id -> (the list, length indexed, requirement -> entries).
_lists: dict[int, tuple[list[Any], int, dict[str, list[Any]]]] = {}
# id(entry) -> (entry, its registration, or None where it is Numba's own)
_entries: dict[int, tuple[Any, Registration | None]] = {}
# dict entries: id(table) -> {class: (handler, registration or None)}
_dicts: dict[int, tuple[Any, dict[Any, tuple[Any, Registration | None]]]] = {}


def _list_entries(table: list[Any], place: str, wanted: set[str] | None) -> list[Registration]:
    memo = _lists.get(id(table))
    if memo is None or memo[0] is not table or memo[1] > len(table):
        memo = (table, 0, {})
    _, done, index = memo
    if done < len(table):
        for item in table[done:]:
            index.setdefault(_requirement(item), []).append(item)
        _lists[id(table)] = (table, len(table), index)
    if wanted is None:
        items = table[: len(table)]
    else:  # entries of one registration group share a requirement: their order is kept
        items = [item for req in sorted(wanted & index.keys()) for item in index[req]]
    out: list[Registration] = []
    for item in items:
        known = _entries.get(id(item))
        if known is None or known[0] is not item:
            known = _entries[id(item)] = (item, _list_entry(item, place))
        if known[1] is not None:
            out.append(known[1])
    return out


def _shape(item: Any) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
    """(implementation, what it is keyed by, signature) of one registry list entry."""
    if isinstance(item, tuple) and item:
        if isinstance(item[-1], tuple):  # a lowering: (impl, *function or attribute name, signature)
            return item[0], item[1:-1], item[-1]
        if len(item) == 2:  # a typing global: (value, its Numba type holding the templates)
            return item[1], item[:1], ()
        return item, (), ()
    return item, (getattr(item, "key", None),), ()  # a typing template, keyed by its `key`


def _requirement(item: Any) -> str:
    """One thing an entry needs to apply to a kernel: ``key:`` a callable it is keyed by, or
    ``type:`` a type it is registered for (as :func:`_formal` names it), else ``always``."""
    _, keyed, sig = _shape(item)
    for k in keyed:
        for part in k if isinstance(k, tuple) else (k,):
            if part is None or isinstance(part, str):
                continue
            if _is_type_or_class(part):
                formal = _formal(part, "type")
                if formal != "*":
                    return formal
            else:
                return f"key:{_ident_memo(part)}"
    for f in sig:
        formal = _formal(f, "type")
        if formal != "*":
            return formal
    return "always"


_idents: dict[int, tuple[Any, str]] = {}


def _ident_memo(obj: Any) -> str:
    known = _idents.get(id(obj))
    if known is None or known[0] is not obj:
        known = _idents[id(obj)] = (obj, ident(obj))
    return known[1]


def _list_entry(item: Any, place: str) -> Registration | None:
    impl, keyed, sig = _shape(item)
    if not (_any_user_object(keyed) or _any_user_object(sig) or _holds_user_code(impl, 0)):
        return None
    if _made_by_typing(impl):
        return None
    objs, formals = _split_keys(keyed)
    formals += list(sig)
    return Registration(place, tuple(ident(o) for o in objs), tuple(_formal(f, "type") for f in formals), impl)


def _dict_entries(table: Any, place: str, formal_kind: str) -> list[Registration]:
    memo = _dicts.get(id(table))
    if memo is None or memo[0] is not table:
        memo = (table, {})
        _dicts[id(table)] = memo
    seen = memo[1]
    out: list[Registration] = []
    for cls, handler in list(table.items()):
        known = seen.get(cls)
        if known is None or known[0] is not handler:
            reg = None
            if _holds_user_code(handler, 0) or _user_object(cls):
                reg = Registration(place, (), (_formal(cls, formal_kind),), handler)
            known = seen[cls] = (handler, reg)
        if known[1] is not None:
            out.append(known[1])
    return out


def _split_keys(keyed: Iterable[Any]) -> tuple[list[Any], list[Any]]:
    """A registration's keys: callables and names (kept as keys) and types (kept as formals);
    a method's key ``(type, name)`` gives one of each."""
    objs: list[Any] = []
    formals: list[Any] = []
    for k in keyed:
        for part in k if isinstance(k, tuple) else (k,):
            if part is None:
                continue
            (formals if _is_type_or_class(part) else objs).append(part)
    return objs, formals


def _is_type_or_class(v: Any) -> bool:
    return is_numba_type(v) or is_numba_type_class(v)


def is_numba_type(v: Any) -> bool:
    """Whether ``v`` is a Numba type, by its class's MRO: an ``isinstance`` against Numba's ABC
    walks every subclass of ``Type`` for each class it has not seen (100 ms over the registries)."""
    return _numba_type() in type(v).__mro__


def is_numba_type_class(v: Any) -> bool:
    """Whether ``v`` is a class of Numba types (by its MRO, as :func:`is_numba_type`)."""
    return isinstance(v, type) and _numba_type() in v.__mro__


_type_base: list[type] = []


def _numba_type() -> type:
    if not _type_base:
        from numba.core.types import Type

        _type_base.append(Type)
    return _type_base[0]


def _formal(f: Any, kind: str) -> str:
    """A type a registration applies to, as ``"type:module:qualname"`` of its class (an instance
    stands for its class: conservative), ``"value:..."`` for a Python class ``typeof`` dispatches
    on, ``"*"`` for what matches anything (``types.Any``, ``VarArg``, a non-type)."""
    from numba.core import types

    if type(f).__name__ == "VarArg" or f is types.Any or f is types.Type:
        return "*"
    if is_numba_type(f):
        return "type:" + _ident_memo(type(f))
    if isinstance(f, type):
        return ("type:" if is_numba_type_class(f) else f"{kind}:") + _ident_memo(f)
    return "*"


# id -> (object, whether it is the user's): the same types key hundreds of registrations.
_object_memo: dict[int, tuple[Any, bool]] = {}


def _any_user_object(parts: Any) -> bool:
    for part in parts if isinstance(parts, tuple) else (parts,):
        if part is None or isinstance(part, str):
            continue
        if isinstance(part, tuple):
            if _any_user_object(part):
                return True
            continue
        memo = _object_memo.get(id(part))
        if memo is None or memo[0] is not part:
            memo = _object_memo[id(part)] = (part, _user_object(part))
        if memo[1]:
            return True
    return False


def _user_object(obj: Any) -> bool:
    """Whether a key or type is the user's: its module is user code and is loaded (a C extension
    of Numba's names a module of its own, ``_nrt_python``, that no import made)."""
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return False
    module = getattr(obj, "__module__", None) if isinstance(obj, (type, pytypes.FunctionType)) else None
    if module is None:
        module = getattr(obj, "__module__", None) or type(obj).__module__
    return user_module(module) and module in sys.modules


def user_function(fn: pytypes.FunctionType, in_numba: bool = False) -> bool:
    """Whether ``fn`` is the user's. A function without a module inside one of Numba's is one
    Numba made with ``exec`` (the jitclass overloads of ``len``, ``operator.add`` ...)."""
    if key.pinned_function(fn) or (in_numba and fn.__module__ is None):
        return False
    return user_module(fn.__module__ or "?")


# id -> (object, whether it holds user code): a wrapper class or function many registrations share
# is read once per process (the object is kept, so that its id stays its own).
_code_memo: dict[int, tuple[Any, bool]] = {}


def _holds_user_code(obj: Any, depth: int) -> bool:
    """Whether a user function sits in ``obj``: itself, a wrapper's closure or ``__wrapped__``, a
    template class's methods (``_overload_func``, ``_definition_func``, a ``generic``).

    Cheap for Numba's own (a load reads ~2,000 of them once per process): a function of Numba's
    without a closure, a class Numba's module defines (found there by its name) are Numba's,
    and what was read once is remembered."""
    if depth > 4 or obj is None:
        return False
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    memo = _code_memo.get(id(obj))
    if memo is not None and memo[0] is obj:
        return memo[1]
    found = _reads_user_code(obj, depth)
    if depth <= 2 or found:  # a "no" found near the depth limit may only mean the limit was reached
        _code_memo[id(obj)] = (obj, found)
    return found


def _reads_user_code(obj: Any, depth: int) -> bool:
    if isinstance(obj, pytypes.FunctionType):
        if user_function(obj, in_numba=depth > 0):
            return True
        if obj.__closure__ is None and "__wrapped__" not in obj.__dict__:
            return False
        inner = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
        inner.append(obj.__dict__.get("__wrapped__"))
        return any(
            _holds_user_code(i, depth + 1) for i in inner if isinstance(i, (type, pytypes.FunctionType)) or _held(i)
        )
    if isinstance(obj, type):
        if user_module(obj.__module__):
            return True
        if getattr(sys.modules.get(obj.__module__), obj.__qualname__, None) is obj:
            return False  # a class of Numba's own module: Numba's code
        return any(
            _holds_user_code(v, depth + 1)
            for v in vars(obj).values()
            if isinstance(v, (pytypes.FunctionType, staticmethod, classmethod))
        )
    if not user_module(type(obj).__module__) and type(obj).__module__.split(".", 1)[0] != "numba":
        return False  # NumPy's ufuncs, Python's objects: no user code inside
    if is_numba_type(obj) and not isinstance(getattr(obj, "templates", None), (tuple, list)):
        return False  # a type holds no code (a user's type is seen as a formal)
    templates = getattr(obj, "templates", None)  # a typing global's Function type
    if isinstance(templates, (tuple, list)):
        return any(_holds_user_code(t, depth + 1) for t in templates)
    for attr in ("__wrapped__", "_imp", "func", "_defn", "py_func"):
        held = getattr(obj, attr, None)
        if held is not None and held is not obj and _holds_user_code(held, depth + 1):
            return True
    return False


def _held(obj: Any) -> bool:
    """A callable object a wrapper may hold user code in (not a type, a module or plain data)."""
    return callable(obj) and not is_numba_type(obj) and not isinstance(obj, pytypes.BuiltinFunctionType)


def _made_by_typing(impl: Any, depth: int = 0) -> bool:
    """Whether Numba's typing registered ``impl`` from a template while it typed (the lowering of an
    ``overload_method`` / ``overload_attribute``, maybe inside ``lower_getattr``'s wrapper): it is
    there only in a process that typed, and what it lowers is its template's, which the typing
    registry holds from the start."""
    if depth > 3 or not isinstance(impl, pytypes.FunctionType) or user_function(impl):
        return False
    bases = tuple(
        base
        for m in _TEMPLATE_MODULES
        for base in (getattr(sys.modules.get(m), name, None) for name in ("FunctionTemplate", "AttributeTemplate"))
        if isinstance(base, type)
    )
    for cell in impl.__closure__ or ():
        held = cell.cell_contents if _filled(cell) else None
        mro = held.__mro__ if isinstance(held, type) else type(held).__mro__
        if any(base in mro for base in bases):
            return True
        if _made_by_typing(held, depth + 1):
            return True
    return False


_TEMPLATE_MODULES = ("numba.cuda.typing.templates", "numba.core.typing.templates")


def _filled(cell: Any) -> bool:
    try:
        return cell.cell_contents is not _EMPTY
    except ValueError:  # an empty cell
        return False


_EMPTY = object()


def _kind(obj: Any) -> str:
    """``"registry"``, ``"models"`` (a data model manager), ``"dispatch"`` (a single-dispatch
    function) or ``""``: by shape, so a registry class Numba adds later is walked too."""
    cls = type(obj)
    if cls.__name__ == "Registry" and not user_module(cls.__module__):
        return "registry"
    if cls.__name__ == "DataModelManager" and isinstance(getattr(obj, "_handlers", None), dict):
        return "models"
    if isinstance(obj, pytypes.FunctionType) and hasattr(obj, "registry") and hasattr(obj, "dispatch"):
        return "dispatch"
    return ""


# -- names of Numba's module-level containers (read once per module per process) ------------------
_scanned: set[str] = set()
_objects: dict[str, Any] = {}  # "module:attribute" -> container


def _numba_objects() -> dict[str, Any]:
    """Every container held by a loaded Numba module, by ``module:attribute``."""
    for name in list(sys.modules.keys() - _scanned):
        _scanned.add(name)
        if not (name.startswith("numba.") or name == "numba"):
            continue
        for attr, obj in list(vars(sys.modules[name]).items()):
            if _kind(obj):
                _objects[f"{name}:{attr}"] = obj
    return _objects


def _names_by_id() -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for name, obj in _numba_objects().items():
        out.setdefault(id(obj), []).append(name)
    return out


def _names_in_all_modules(obj: Any) -> list[str]:
    """Where a user module holds a registry it installed (rare: every loaded module is read)."""
    out = []
    for name, module in list(sys.modules.items()):
        for attr, value in list(getattr(module, "__dict__", {}).items()):
            if value is obj:
                out.append(f"{name}:{attr}")
    return out


def name_map(containers: Iterable[Any], names: list[list[str]]) -> dict[int, str]:
    """id -> the first name of each container found under ``names`` (for :attr:`Registration.place`)."""
    out: dict[int, str] = {}
    ids = {id(o) for o in containers}
    for alternatives in names:
        for name in alternatives:
            module, _, attr = name.partition(":")
            obj = getattr(sys.modules.get(module), attr, None)
            if obj is not None and id(obj) in ids:
                out.setdefault(id(obj), alternatives[0])
                break
    return out

"""What Numba resolved while compiling one ``@lazy_kernel``: a manifest recorded at compile time,
verified on every load (as ccache's direct mode keeps the headers a compile read).

The first key (:mod:`.key`) covers what can be seen from the kernel's bytecode without typing it.
Typing and lowering reach further: an ``@intrinsic``'s definition (its codegen), the implementation
an ``@overload`` / ``overload_method`` / ``register_jitable`` returned, device functions of other
modules, and the values Numba froze into the code (a global's value, a closure cell, whatever a
module ``__getattr__`` served). Those are read here from what Numba actually resolved, never from a
hand list (numba-cuda 0.30, see DESIGN.md "Where Numba keeps what it resolved"):

- ``cres.fndesc.typemap``: a ``types.Function`` per resolved callable, whose templates carry
  ``_definition_func`` (intrinsics), ``_overload_func`` and ``_impl_cache`` (overloads: the
  implementations compiled, each a dispatcher whose own compile result is the next level down);
  device functions as ``CUDADispatcher`` types (``.dispatcher``);
- ``cres.type_annotation.blocks``: the typed IR, whose ``Global`` / ``FreeVar`` nodes and
  ``getattr`` on modules are the frozen values.

The manifest lists each user function (module, qualname, digest of its code and reachable values)
and each frozen value (where to find it again, digest of its value). While reading them it gathers
the compile's world (every type, callable key and frozen value's class, :class:`.registered.World`)
and keeps every user registration of every Numba registry that applies to it (:mod:`.registered`:
casts, constants, getattrs, data models, ``typeof`` ...). :func:`verify` re-finds and
re-hashes them, with no typing or lowering, and names the first one that changed. A frozen value
that is a device array or another process-specific address makes the instantiation
``memory_only``: it is never written to the store.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import operator
import sys
import types as pytypes
from _ctypes import CFuncPtr  # ctypes._CFuncPtr, which typeshed does not export
from typing import Any

from . import key, linked, registered

log = logging.getLogger("lazykern")

VERSION = 3  # 3: every user registration that applies to the compile's types and callables ("registered")
_MISSING = object()


def record(cres: Any, py_func: pytypes.FunctionType, *, lines: bool) -> dict[str, Any]:
    """The manifest of one compile result (call it while the compile's overloads are in place)."""
    r = _Recorder(py_func, lines, cres)
    try:
        r.result(cres)
        section, why = registered.record(r.world, cres.typing_context, cres.target_context, lines=lines)
        r.unverifiable = r.unverifiable or why
    except Exception as exc:  # a numba-cuda that keeps these elsewhere: run from memory, never stale
        log.warning(
            "could not read what Numba resolved for %s (%r): it runs from memory only", py_func.__qualname__, exc
        )
        r.unverifiable = f"lazykern could not read what Numba resolved ({type(exc).__name__}: {exc})"
    manifest: dict[str, Any] = {
        "version": VERSION,
        "lines": lines,
        "functions": r.functions,
        "values": r.values,
    }
    if r.unverifiable:  # a partial record is never kept: the entry is memory-only anyway
        manifest["unverifiable"] = r.unverifiable
        return manifest
    manifest.update(section)
    if r.memory_only:
        manifest["memory_only"] = r.memory_only
    return manifest


def verify(manifest: Any, py_func: pytypes.FunctionType) -> str | None:
    """``None`` when everything the manifest lists is unchanged in this process, else why not."""
    if not isinstance(manifest, dict) or manifest.get("version") != VERSION:
        return "the entry has no manifest of what Numba resolved (written by another lazykern)"
    if manifest.get("memory_only"):
        return f"memory only: {manifest['memory_only']}"
    if manifest.get("unverifiable"):
        return f"cannot be verified in a new process: {manifest['unverifiable']}"
    why = linked.verify(manifest.get("linked", []))  # stats only: the cheapest check first
    if why is not None:
        return why
    lines = bool(manifest.get("lines"))
    try:
        for module, qualname, digest in manifest["functions"]:
            fn = find_function(module, qualname)
            if fn is None:
                return f"{module}.{qualname}, which the compile called, is gone"
            if _function_digest(fn, lines) != digest:
                return f"{module}.{qualname}, which the compile called, changed"
        for where, digest in manifest["values"]:
            value = _refind(where, py_func)
            if value is _MISSING:
                return f"{_describe(where)}, which the compile froze into the code, is gone"
            if key.value_digest(value, lines=lines) != digest:
                return f"{_describe(where)}, which the compile froze into the code, changed"
        why = registered.verify(manifest, lines=lines)
        if why is not None:
            return why
    except Exception as exc:  # a malformed manifest, or user code (a module __getattr__) raising
        return f"the entry's manifest could not be verified ({type(exc).__name__}: {exc})"
    return None


def find_function(module: str, qualname: str) -> pytypes.FunctionType | None:
    """The function ``module.qualname`` in this process (through a dispatcher or an intrinsic)."""
    mod = sys.modules.get(module)
    if mod is None:
        try:
            mod = importlib.import_module(module)
        except Exception:  # the module cannot be imported here: the entry cannot be verified
            return None
    obj: Any = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    fn = _python_function(obj)
    return fn if fn is not None and fn.__qualname__ == qualname else None


# -- recording ------------------------------------------------------------------------------------
class _Recorder:
    def __init__(self, py_func: pytypes.FunctionType, lines: bool, cres: Any) -> None:
        self.kernel = py_func
        self.lines = lines
        walked = key.reached_functions(py_func)  # the first key covers these already
        self.covered = {id(fn) for fn in walked}
        self._keyed = {(fn.__module__, fn.__qualname__) for fn in walked}  # and the code nested in them
        self.functions: list[list[str]] = []
        self.values: list[list[Any]] = []
        self.unverifiable = ""
        self.memory_only = ""
        self._done: set[int] = set()
        self._recorded: set[tuple[str, str]] = set()
        self._values_seen: set[str] = set()
        manager = getattr(getattr(cres, "target_context", None), "data_model_manager", None)
        self.world = registered.World(getattr(manager, "lookup", None))

    def result(self, cres: Any) -> None:
        """One compile result: its frozen values, then everything its typing resolved, recursively."""
        if id(cres) in self._done or getattr(cres, "fndesc", None) is None:
            return  # seen, or not a compile result (a launched kernel has no typing to read)
        self._done.add(id(cres))
        annotation = getattr(cres, "type_annotation", None)
        owner = getattr(getattr(annotation, "func_id", None), "func", None)
        if annotation is not None and isinstance(owner, pytypes.FunctionType):
            self._frozen(annotation.blocks, cres.fndesc.typemap, owner)
        for t in list(cres.fndesc.typemap.values()):
            self._resolved(t)
            self.world.add_type(t)
        for expr, sig in list(cres.fndesc.calltypes.items()):
            for t in (*getattr(sig, "args", ()), getattr(sig, "return_type", None), getattr(sig, "recvr", None)):
                self.world.add_type(t)
            for attr in ("fn", "immuted_fn"):  # `a + b`: typed and lowered by operator.add's registrations
                try:
                    self.world.add_key(getattr(expr, attr, None))
                except KeyError:  # an ir.Expr answers a missing attribute with KeyError
                    pass
            # `a[i]`, `a[i] = v`, `del a[i]`: typed and lowered by operator.getitem's ... registrations
            self.world.add_key(_ITEM_KEYS.get(getattr(expr, "op", None) or type(expr).__name__))
        self._lowered(cres)

    def _resolved(self, t: Any) -> None:
        dispatcher = getattr(t, "dispatcher", None)
        if dispatcher is not None and isinstance(getattr(dispatcher, "py_func", None), pytypes.FunctionType):
            self.function(dispatcher.py_func)  # a device function
            for compiled in list(getattr(dispatcher, "overloads", {}).values()):
                self.result(compiled)
        templates = list(getattr(t, "templates", ()) or ())
        if getattr(t, "template", None) is not None:  # a bound method (overload_method)
            templates.append(t.template)
        for template in templates:
            self.world.add_key(getattr(template, "key", None))
            for fn in _template_functions(template):
                self.function(fn)
            for impl in list((getattr(template, "_impl_cache", None) or {}).values()):
                disp = impl[0] if isinstance(impl, tuple) and impl else None
                impl_func = getattr(disp, "py_func", None)
                if isinstance(impl_func, pytypes.FunctionType):
                    self.function(impl_func)
                    for compiled in list(getattr(disp, "overloads", {}).values()):
                        self.result(compiled)

    def _lowered(self, cres: Any) -> None:
        """The lowering implementation of each call (``lower_builtin``), as Numba's target context picks it."""
        from numba.cuda.core import ir

        annotation = getattr(cres, "type_annotation", None)
        context = getattr(cres, "target_context", None)
        if annotation is None or context is None:
            return
        for expr, sig in list(cres.fndesc.calltypes.items()):
            if not (isinstance(expr, ir.Expr) and expr.op == "call"):
                continue
            fnty = cres.fndesc.typemap.get(expr.func.name)
            if fnty is None or getattr(fnty, "dispatcher", None) is not None:
                continue  # device functions are compile results of their own (above)
            try:
                impl = context.get_function(fnty, sig)
            except Exception:  # e.g. a bound method lowered through its own path: nothing to add
                continue
            for fn in _user_functions(impl):
                self.function(fn)

    def function(self, fn: pytypes.FunctionType) -> None:
        module, qualname = fn.__module__ or "", fn.__qualname__
        if key.pinned_function(fn) or id(fn) in self.covered or (module, qualname) in self._recorded:
            return  # Numba's own (its version is in the key), or keyed by the first key already
        if not module:  # made by exec() without a module name: nothing can find it again
            where = f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"
            self.unverifiable = self.unverifiable or f"function {qualname!r} made by exec() without a module ({where})"
            return
        if "<locals>" in qualname:
            parts = qualname.split(".<locals>.")
            outers = {(module, ".<locals>.".join(parts[:i])) for i in range(1, len(parts))}
            if outers & (self._recorded | self._keyed):
                return  # its code is a constant of a function keyed already
            self.unverifiable = self.unverifiable or f"{module}.{qualname} is not reachable by name"
            return
        if find_function(module, qualname) is not fn:
            self.unverifiable = self.unverifiable or f"{module}.{qualname} is not reachable by name"
            return
        self._recorded.add((module, qualname))
        self.functions.append([module, qualname, _function_digest(fn, self.lines)])

    def _frozen(self, blocks: Any, typemap: Any, owner: pytypes.FunctionType) -> None:
        from numba.cuda.core import ir

        for block in blocks.values():
            for stmt in block.body:
                value = getattr(stmt, "value", None)
                if isinstance(value, ir.Global):
                    self._value(("global", owner, value.name), value.value)
                elif isinstance(value, ir.FreeVar):
                    self._value(("cell", owner, value.name), value.value)
                elif isinstance(value, ir.Const):
                    self._scan(value.value, f"a constant in {owner.__qualname__}")
                    self.world.add_value(value.value)
                elif isinstance(value, ir.Expr) and value.op == "getattr":
                    held_by = typemap.get(value.value.name)
                    module = getattr(held_by, "pymod", None)
                    if isinstance(module, pytypes.ModuleType) and not key.pinned_module(module.__name__):
                        # `cfg.N`: a module's attribute (maybe served by its __getattr__), frozen
                        self._value(("attr", module.__name__, value.attr), getattr(module, value.attr, None))

    def _value(self, where: tuple[Any, ...], value: Any) -> None:
        self._scan(value, _describe(where))
        self.world.add_value(value)
        fn = _python_function(value)
        if fn is not None:  # a function, device function or intrinsic: keyed by its code, memoized
            self.function(fn)
            return
        spot = _locate(where, self.kernel)
        if spot is None:
            if not _covered_owner(where, self):
                self.unverifiable = self.unverifiable or f"{_describe(where)} is not reachable by name"
            return
        if spot[1] == "builtins":
            return  # Python's own: pinned by the Python version in the key
        ident = repr(spot)
        if ident not in self._values_seen:
            self._values_seen.add(ident)
            self.values.append([spot, key.value_digest(value, lines=self.lines)])

    def _scan(self, value: Any, what: str) -> None:
        if not self.memory_only:
            reason = process_specific(value)
            if reason:
                self.memory_only = f"{what} is {reason}, whose address Numba baked into the code"


# Typed IR operations (an Expr's op, a statement's class) typed and lowered as an operator's call.
_ITEM_KEYS = {
    "getitem": operator.getitem,
    "static_getitem": operator.getitem,
    "typed_getitem": operator.getitem,
    "SetItem": operator.setitem,
    "StaticSetItem": operator.setitem,
    "DelItem": operator.delitem,
}


def process_specific(value: Any, depth: int = 0) -> str:
    """Why ``value`` (or an item of it) holds an address valid in this process only, or ``""``."""
    if depth > 16:
        return ""
    if hasattr(value, "__cuda_array_interface__") or hasattr(type(value), "__cuda_array_interface__"):
        return f"a device array ({type(value).__module__}.{type(value).__qualname__})"
    if isinstance(value, (ctypes._Pointer, CFuncPtr, ctypes.c_void_p)):
        return f"a ctypes pointer ({type(value).__qualname__})"
    if isinstance(value, (tuple, list)):
        for item in value:
            reason = process_specific(item, depth + 1)
            if reason:
                return reason
    return ""


# -- where a frozen value lives, so a new process can find it again ---------------------------------
def _locate(where: tuple[Any, ...], kernel: pytypes.FunctionType) -> list[Any] | None:
    """A JSON-able address: ``["global", module, name]``, ``["cell", owner, name]`` or
    ``["attr", module, name]``; owner is ``"<kernel>"`` or ``"module:qualname"``."""
    kind = where[0]
    if kind == "attr":
        return ["attr", where[1], where[2]]
    owner: pytypes.FunctionType = where[1]
    if kind == "global":
        module = owner.__globals__.get("__name__")
        if not isinstance(module, str) or sys.modules.get(module) is None:
            return None
        if where[2] not in owner.__globals__:
            return ["global", "builtins", where[2]]
        if vars(sys.modules[module]) is not owner.__globals__:
            return None
        return ["global", module, where[2]]
    if owner is kernel:
        return ["cell", "<kernel>", where[2]]
    if "<locals>" in owner.__qualname__ or find_function(owner.__module__, owner.__qualname__) is not owner:
        return None
    return ["cell", f"{owner.__module__}:{owner.__qualname__}", where[2]]


def _covered_owner(where: tuple[Any, ...], r: _Recorder) -> bool:
    """A value of a function the first key walks (its cells and globals are keyed there)."""
    return where[0] != "attr" and id(where[1]) in r.covered


def _refind(where: list[Any], kernel: pytypes.FunctionType) -> Any:
    kind, place, name = where
    if kind == "cell":
        fn = kernel if place == "<kernel>" else find_function(*place.split(":", 1))
        if fn is None:
            return _MISSING
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            if var == name:
                try:
                    return cell.cell_contents
                except ValueError:
                    return _MISSING
        return _MISSING
    module = sys.modules.get(place)
    if module is None:
        try:
            module = importlib.import_module(place)
        except Exception:
            return _MISSING
    return getattr(module, name, _MISSING)  # through a module __getattr__ too, as Numba read it


def _describe(where: Any) -> str:
    kind, place, name = where[0], where[1], where[2]
    if isinstance(place, pytypes.FunctionType):
        place = f"{place.__module__}.{place.__qualname__}"
    return {"global": f"global {name!r} of {place}", "cell": f"closure variable {name!r} of {place}"}.get(
        kind, f"{place}.{name}"
    )


def _template_functions(template: Any) -> list[pytypes.FunctionType]:
    """The user's functions a typing template holds: an intrinsic's definition, an overload, a
    ``type_callable`` typer (inside Numba's wrapper), a hand-written template's methods."""
    out: list[pytypes.FunctionType] = []
    for attr in ("_definition_func", "_overload_func", *vars(template)):
        for fn in _user_functions(getattr(template, attr, None)):
            if fn not in out:
                out.append(fn)
    return out


def _user_functions(obj: Any, depth: int = 0, in_pinned: bool = False) -> list[pytypes.FunctionType]:
    """User functions behind ``obj``: itself, or what Numba's wrappers around it hold (closure
    cells, ``__wrapped__``, ``_imp``, ``func``, ``_defn``, ``py_func``); Numba's own are skipped."""
    if obj is None or depth > 4 or isinstance(obj, (str, bytes, int, float, type, pytypes.ModuleType)):
        return []
    if isinstance(obj, pytypes.FunctionType) and not key.pinned_function(obj):
        # A function without a module inside a Numba wrapper is one Numba made with exec (the
        # jitclass dunder overloads of len, operator.truediv, ...): its source is Numba's.
        return [] if in_pinned and obj.__module__ is None else [obj]
    in_pinned = in_pinned or (isinstance(obj, pytypes.FunctionType) and key.pinned_function(obj))
    inner: list[Any] = [getattr(obj, a, None) for a in ("__wrapped__", "_imp", "func", "_defn", "py_func")]
    if isinstance(obj, pytypes.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                inner.append(cell.cell_contents)
            except ValueError:
                pass
    out: list[pytypes.FunctionType] = []
    for item in inner:
        if item is not None and item is not obj:
            out += _user_functions(item, depth + 1, in_pinned)
    return out


def _python_function(obj: Any) -> pytypes.FunctionType | None:
    """The Python function behind a function, a Numba dispatcher or an ``@intrinsic``."""
    for candidate in (obj, getattr(obj, "py_func", None), getattr(obj, "_defn", None)):
        if isinstance(candidate, pytypes.FunctionType):
            return candidate
    return None


def _function_digest(fn: pytypes.FunctionType, lines: bool) -> str:
    return key.function_digest_memo(fn, lines)

"""What Numba's registries hold for each callable a ``@lazy_kernel`` compile resolved (issue 35.6).

The manifest (:mod:`.resolved`) checks the code of the functions a compile resolved. That is not
enough: a module that keeps two implementations and registers one (``overload(f)(impl_a)``) can be
edited to register the other, and every function the manifest names is still unchanged. So for each
key the compile resolved (a function, ``len``, ``operator.add``, a type's method) the manifest also
lists the user implementations the registries hold for it — typing templates (``overload``,
``type_callable``, ``overload_method``, hand-written templates) and lowerings (``lower_builtin``),
each by module, qualname and code digest, in registration order. Typing and lowering pick among
those candidates by the argument types alone, so the same candidates give the same pick: a load
compares the lists, and never types the kernel.

Numba's own registrations are left out: the Numba and numba-cuda versions in the key pin them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from . import key

# One index per process over the registries' entries, rebuilt when a registry grows (they only
# grow: registering appends). key id -> [(kind, attr, entry)].
_index: dict[str, Any] = {"sizes": None, "by_key": {}, "keys": []}


def key_of(t: Any) -> tuple[Any, str] | None:
    """The registry key and method name (``""`` for a global) of a resolved ``types.Function`` /
    ``BoundFunction``, or ``None`` for other types."""
    template = getattr(t, "template", None)
    if template is not None:  # a bound method: its template's key is (the type's class, method name)
        k = getattr(template, "key", None)
        if isinstance(k, tuple) and len(k) == 2 and isinstance(k[1], str):
            return (k[0], k[1])
        return None
    for template in getattr(t, "templates", ()) or ():
        k = getattr(template, "key", None)
        if k is not None:
            return (k, "")
    return None


def identity(obj: Any) -> list[str] | None:
    """``[module, qualname]`` that finds ``obj`` again in a new process, or ``None``."""
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if module is None and type(obj).__name__ == "ufunc":
        module = "numpy"
    if not isinstance(module, str) or not isinstance(name, str) or "<locals>" in name:
        return None
    return [module, name] if find(module, name) is obj else None


def find(module: str, qualname: str) -> Any:
    """The object ``module.qualname`` in this process (importing the module), or ``None``."""
    mod = sys.modules.get(module)
    if mod is None:
        try:
            mod = importlib.import_module(module)
        except Exception:  # not importable here: the caller reports the key as gone
            return None
    obj: Any = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def candidates(
    k: Any, attr: str, functions: Callable[[str, Any], list[Any]], digest: Callable[[Any], str]
) -> list[list[str]]:
    """The user implementations registered for ``k`` (method ``attr``), in registration order:
    ``[kind, module, qualname, code digest, lowering argument types]`` each. ``functions(kind,
    holder)`` gives the user functions a template (kind ``"typing"``) or a lowering holds."""
    out: list[list[str]] = []
    for kind, argtypes, holder in _entries_for(k, attr):
        for fn in functions(kind, holder):
            out.append([kind, fn.__module__ or "", fn.__qualname__, digest(fn), argtypes])
    return out


def _entries_for(k: Any, attr: str) -> list[tuple[str, str, Any]]:
    typing_regs, lowering_regs = _registries()
    sizes = [len(x) for r in typing_regs for x in (r.functions, r.attributes, r.globals)]
    sizes += [len(r.functions) for r in lowering_regs]
    if _index["sizes"] != sizes:
        # the index holds its keys alive, so no id in it is reused by another object meanwhile
        _index["by_key"], _index["keys"] = _build(typing_regs, lowering_regs)
        _index["sizes"] = sizes
    entries: list[tuple[str, str, str, Any]] = _index["by_key"].get(id(k), [])
    return [(kind, argtypes, holder) for kind, entry_attr, argtypes, holder in entries if entry_attr == attr]


def _build(typing_regs: list[Any], lowering_regs: list[Any]) -> tuple[dict[int, list[Any]], list[Any]]:
    by_key: dict[int, list[Any]] = {}
    keep: list[Any] = []

    def add(k: Any, item: tuple[str, str, str, Any]) -> None:
        keep.append(k)
        by_key.setdefault(id(k), []).append(item)

    for reg in typing_regs:
        for template in reg.functions:
            add(getattr(template, "key", None), ("typing", "", "", template))
        for template in reg.attributes:
            attr = getattr(template, "_attr", None)
            if isinstance(attr, str):  # overload_method / overload_attribute: (type, name)
                add(getattr(template, "key", None), ("typing", attr, "", template))
        for val, typ in reg.globals:
            for template in getattr(typ, "templates", ()) or ():
                add(val, ("typing", "", "", template))
    for reg in lowering_regs:
        for impl, func, argtys in reg.functions:
            add(func, ("lowering", "", repr(key.describe_value(argtys)), impl))
    return by_key, keep


def _registries() -> tuple[list[Any], list[Any]]:
    """The typing and lowering registries user code registers into: numba-cuda's (what
    ``numba.cuda.extending`` and ``cudadecl`` / ``cudaimpl`` write), numba's own generic ones, and
    any a user installed into the CUDA contexts."""
    from numba.cuda import cudadecl, cudaimpl
    from numba.cuda.core import imputils
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.typing import templates

    typing_regs: list[Any] = [templates.builtin_registry, cudadecl.registry]
    lowering_regs: list[Any] = [imputils.builtin_registry, cudaimpl.registry]
    core_templates = sys.modules.get("numba.core.typing.templates")
    if core_templates is not None:
        typing_regs.append(core_templates.builtin_registry)
    core_imputils = sys.modules.get("numba.core.imputils")
    if core_imputils is not None:
        lowering_regs.append(core_imputils.builtin_registry)
    for ctx, regs in ((cuda_target._typingctx, typing_regs), (cuda_target._targetctx, lowering_regs)):
        for reg in list(getattr(ctx, "_registries", {}) or {}):
            if all(reg is not r for r in regs):
                regs.append(reg)
    return typing_regs, lowering_regs

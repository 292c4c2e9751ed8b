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
            described = repr(key.describe_value(argtypes)) if kind == "lowering" else ""
            out.append([kind, fn.__module__ or "", fn.__qualname__, digest(fn), described])
    return out


def _entries_for(k: Any, attr: str) -> list[tuple[str, Any, Any]]:
    """(kind, lowering argument types, template or lowering) registered for ``k``, in order.

    A scan that allocates only for matches: an index of all ~1100 entries would allocate enough
    to set off a full garbage collection (100 ms with Numba loaded) on a warm load."""
    typing_regs, lowering_regs = _registries()
    out: list[tuple[str, Any, Any]] = []
    for reg in typing_regs:
        if not attr:
            out += [("typing", (), t) for t in reg.functions if getattr(t, "key", None) is k]
            for val, typ in reg.globals:
                if val is k:
                    out += [("typing", (), t) for t in getattr(typ, "templates", ()) or ()]
        else:  # overload_method / overload_attribute: a template keyed by the type, with its name
            # (a hand-written AttributeTemplate answers the name with its `resolve_<name>` method)
            out += [
                ("typing", (), t)
                for t in reg.attributes
                if getattr(t, "_attr", None) in (attr, None)
                and (getattr(t, "_attr", None) == attr or hasattr(t, f"resolve_{attr}"))
                and _keyed_by(getattr(t, "key", None), k)
            ]
    for reg in lowering_regs:
        if not attr:
            out += [("lowering", argtys, impl) for impl, func, argtys in reg.functions if func is k]
        else:  # lower_getattr(type, name)
            out += [
                ("lowering", (), impl) for impl, a, ty in getattr(reg, "getattrs", ()) if a == attr and _keyed_by(ty, k)
            ]
    return out


def _keyed_by(registered_key: Any, k: Any) -> bool:
    """Whether a registration for a type (its class, or an instance of it; ``lower_getattr`` keeps
    it in a 1-tuple) is one for ``k``."""
    if isinstance(registered_key, tuple) and len(registered_key) == 1:
        registered_key = registered_key[0]
    return registered_key is k or (isinstance(k, type) and isinstance(registered_key, k))


def _registries() -> tuple[list[Any], list[Any]]:
    """The typing and lowering registries user code registers into: numba-cuda's (what
    ``numba.cuda.extending`` and ``cudadecl`` / ``cudaimpl`` write), numba's own generic ones, and
    any a user installed into the CUDA contexts. Only from modules already imported: one nobody
    imported holds no user registration, and importing it would cost a warm load a few hundred ms."""
    typing_regs: list[Any] = []
    lowering_regs: list[Any] = []
    for module, attr, regs in _REGISTRIES:
        reg = getattr(sys.modules.get(module), attr, None)
        if reg is not None:
            regs_list = typing_regs if regs == "typing" else lowering_regs
            regs_list.append(reg)
    target = getattr(sys.modules.get("numba.cuda.descriptor"), "cuda_target", None)
    for ctx, regs_list in (
        (getattr(target, "_typingctx", None), typing_regs),
        (getattr(target, "_targetctx", None), lowering_regs),
    ):
        for reg in list(getattr(ctx, "_registries", {}) or {}):
            if all(reg is not r for r in regs_list):
                regs_list.append(reg)
    return typing_regs, lowering_regs


_REGISTRIES = (
    ("numba.cuda.typing.templates", "builtin_registry", "typing"),
    ("numba.cuda.cudadecl", "registry", "typing"),
    ("numba.core.typing.templates", "builtin_registry", "typing"),
    ("numba.cuda.core.imputils", "builtin_registry", "lowering"),
    ("numba.cuda.cudaimpl", "registry", "lowering"),
    ("numba.core.imputils", "builtin_registry", "lowering"),
)

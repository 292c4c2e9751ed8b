"""The registry of kernel families: built-ins plus those other packages declare.

A package ships a family by declaring an entry point in the ``lazykern.families``
group, whose value is ``"package.module:attribute"`` naming a
:class:`~lazykern.KernelFamily`::

    [project.entry-points."lazykern.families"]
    mykernels = "mypkg.kernels:family"

``lazykern warm --family mykernels``, bundle imports (which recompute keys) and
:func:`lazykern.dask.warm_workers` then find it by name. The built-in
``tropical`` family is declared the same way in lazykern's own metadata and is
also known without it, so an uninstalled checkout works.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from ..errors import FamilyError

ENTRY_POINT_GROUP = "lazykern.families"
BUILTIN = {"tropical": "lazykern.tropical:family"}

log = logging.getLogger("lazykern")


def declared() -> dict[str, str]:
    """Family name -> ``"module:attribute"``: the built-ins, then every installed entry point."""
    import importlib.metadata  # import on first use: startup time (`lazykern --help` imports this module)

    out = dict(BUILTIN)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        out[ep.name] = ep.value
    return out


def resolve(spec: str | Callable[[], Any]) -> Any:
    """A KernelFamily from a registered name, ``"package.module:attribute"`` or a zero-argument factory
    (given, or named by ``"module:attribute"``).

    Raises :class:`~lazykern.errors.FamilyError` saying which part failed.
    """
    if callable(spec):
        return _checked(spec(), repr(spec))
    target = declared().get(spec, spec)
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        known = ", ".join(sorted(declared()))
        raise FamilyError(f"unknown family {spec!r}: use one of {known} or 'package.module:attribute'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise FamilyError(f"family {spec!r}: cannot import module {module_name!r} ({exc})") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise FamilyError(f"family {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
    return _checked(obj if _is_family(obj) or not callable(obj) else obj(), spec)


def loaded() -> dict[str, Any]:
    """Every declared family that imports, by its own ``name``; one that fails, or whose name is
    taken by one declared before it (built-ins come first), is logged and left out."""
    out: dict[str, Any] = {}
    for name, target in declared().items():
        try:
            family = resolve(target)
        except FamilyError as exc:
            log.warning("kernel family %r (%s) left out: %s", name, target, exc)
            continue
        key = getattr(family, "name", name)
        if key in out and out[key] is not family:  # built-ins first: a package cannot shadow one
            log.warning("kernel family %r (%s) left out: a family of that name is already registered", name, target)
            continue
        out[key] = family
    return out


def _is_family(obj: Any) -> bool:
    return hasattr(obj, "names") and hasattr(obj, "get") and hasattr(obj, "key")


def _checked(obj: Any, spec: str) -> Any:
    if not _is_family(obj):
        raise FamilyError(f"family {spec!r} is a {type(obj).__name__}, not a lazykern KernelFamily")
    return obj

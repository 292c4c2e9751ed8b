"""What decides a Numba-Python kernel's binary, reduced to one digest.

numba-cuda's own cache keys a kernel by its file's timestamp and misses edits
to device functions imported from other modules. Here the fingerprint covers
the *bytecode* Numba compiles (not the source text on disk, which may have
changed since import), walked transitively: every ``@cuda.jit`` device
function, plain function and module attribute the kernel names, the values of
the global constants and arrays Numba freezes into the code, closure cells,
and the contents of every linked file (CUDA C++ included, from ``link=`` and
from ``cuda.declare_device(..., link=...)``).
"""

from __future__ import annotations

import hashlib
import os
import sys
import types as pytypes
from collections.abc import Iterable
from typing import Any

import numpy as np

# Modules whose contents are pinned by the versions that go into the key.
_PINNED = ("numba", "numpy", "math", "cmath", "operator", "builtins", "cuda", "llvmlite")


def _pinned(module_name: str | None) -> bool:
    return bool(module_name) and module_name.split(".", 1)[0] in _PINNED


class _Walker:
    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.seen: set[int] = set()
        self.links: list[Any] = []

    def put(self, *parts: Any) -> None:
        for p in parts:
            data = p if isinstance(p, bytes) else repr(p).encode()
            self.h.update(len(data).to_bytes(8, "little"))
            self.h.update(data)

    def code(self, co: pytypes.CodeType) -> None:
        """Bytecode, names and constants; nested code objects recursively."""
        self.put(
            "code",
            co.co_code,
            co.co_names,
            co.co_varnames,
            co.co_freevars,
            co.co_cellvars,
            co.co_argcount,
            co.co_posonlyargcount,
            co.co_kwonlyargcount,
            co.co_flags,
        )
        for c in co.co_consts:
            if isinstance(c, pytypes.CodeType):
                self.code(c)
            else:
                self.put(type(c).__name__, c)

    def function(self, fn: pytypes.FunctionType) -> None:
        if id(fn) in self.seen:
            self.put("seen", fn.__qualname__)
            return
        self.seen.add(id(fn))
        co = fn.__code__
        self.put("function", fn.__module__, fn.__qualname__, fn.__defaults__, fn.__kwdefaults__)
        self.code(co)
        names = _all_names(co)
        for name in sorted(names):
            if name in fn.__globals__:
                self.value(name, fn.__globals__[name], names)
        for name, cell in zip(co.co_freevars, fn.__closure__ or ()):
            try:
                self.value(name, cell.cell_contents, names)
            except ValueError:  # an empty cell
                self.put(name, "<empty cell>")

    def value(self, name: str, v: Any, names: frozenset[str]) -> None:
        """One global (or closure cell) the code refers to."""
        py_func = getattr(v, "py_func", None)
        if isinstance(py_func, pytypes.FunctionType):  # a Numba dispatcher (device function, @jit)
            self.put("dispatcher", name, sorted((k, _safe_repr(o)) for k, o in getattr(v, "targetoptions", {}).items()))
            self.links.extend(getattr(v, "targetoptions", {}).get("link", ()) or ())
            self.function(py_func)
        elif isinstance(v, pytypes.FunctionType):
            if _pinned(v.__module__):
                self.put("pinned function", name, v.__module__, v.__qualname__)
            else:
                self.function(v)
        elif isinstance(v, pytypes.ModuleType):
            self.put("module", name, v.__name__)
            if _pinned(v.__name__) or id(v) in self.seen:
                return
            self.seen.add(id(v))
            # `mod.attr` puts both names in co_names: follow the attributes it may name.
            for attr in sorted(names):
                if attr in vars(v):
                    self.value(f"{name}.{attr}", vars(v)[attr], names)
        elif _is_extern(v):
            self.put("extern", name, v.name, str(v.sig))
            self.links.extend(_extern_links(v))
        elif isinstance(v, np.ndarray):  # Numba freezes global arrays into the code
            self.put("array", name, v.dtype.str, v.shape, hashlib.sha256(np.ascontiguousarray(v).tobytes()).digest())
        elif isinstance(v, (int, float, complex, str, bytes, bool, type(None), np.generic, tuple, frozenset)):
            self.put("const", name, type(v).__name__, _safe_repr(v))
        else:
            # Classes, Numba types, enums: their identity and repr decide the typing.
            self.put("other", name, type(v).__module__, type(v).__qualname__, _safe_repr(v))


def _all_names(co: pytypes.CodeType) -> frozenset[str]:
    names = set(co.co_names)
    for c in co.co_consts:
        if isinstance(c, pytypes.CodeType):
            names |= _all_names(c)
    return frozenset(names)


def _safe_repr(v: Any) -> str:
    try:
        text = repr(v)
    except Exception:
        return "<unrepresentable>"
    # Default reprs carry an address, which would make the key differ per process.
    return text if " at 0x" not in text else text.split(" at 0x", 1)[0]


def _is_extern(v: Any) -> bool:
    return type(v).__name__ == "ExternFunction" and hasattr(v, "sig") and hasattr(v, "name")


def _extern_links(extfn: Any) -> list[Any]:
    """Files linked for a ``cuda.declare_device`` function, read back from Numba's lowering registry."""
    try:
        from numba.cuda.descriptor import cuda_target

        selector = cuda_target.target_context._defns.get(extfn)
        if selector is None:
            return []
        out = []
        for _sig, impl in selector.versions:
            for lib in getattr(impl, "libs", ()):
                out.extend(sorted(getattr(lib, "_linking_files", ()), key=_link_name))
        return out
    except Exception:  # a numba-cuda without this registry layout: the declared name still keys it
        return []


def _link_name(item: Any) -> str:
    return item if isinstance(item, str) else f"{type(item).__name__}:{getattr(item, 'name', '')}"


def link_digest(items: Iterable[Any]) -> list[list[str]]:
    """(name, sha256 of contents) for each linked file or in-memory code object."""
    out = []
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            path = os.fspath(item)
            try:
                with open(path, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
            except OSError as exc:
                digest = f"unreadable: {exc}"
            out.append([os.path.basename(path), digest])
        else:
            data = getattr(item, "data", b"")
            if isinstance(data, str):
                data = data.encode()
            out.append([_link_name(item), hashlib.sha256(bytes(data)).hexdigest()])
    return out


def fingerprint(pyfunc: pytypes.FunctionType, link: Iterable[Any] = ()) -> tuple[str, list[list[str]]]:
    """sha256 over the kernel, everything it reaches, and its linked files' contents.

    Returns ``(digest, links)`` where ``links`` lists each linked file's name and digest.
    """
    w = _Walker()
    w.put("python", sys.version_info[:2])
    w.function(pyfunc)
    links = link_digest([*link, *w.links])
    w.put("links", links)
    return w.h.hexdigest(), links

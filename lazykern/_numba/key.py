"""What decides a Numba-Python kernel's binary, reduced to one digest.

numba-cuda's own cache keys a kernel by its file's timestamp and misses edits
to device functions imported from other modules. Here the fingerprint covers
the *bytecode* Numba compiles (not the source text on disk, which may have
changed since import), walked transitively: every ``@cuda.jit`` device
function, plain function and module attribute the kernel names, the values of
the global constants and arrays Numba freezes into the code, closure cells,
and the contents of every linked file (CUDA C++ included, from ``link=`` and
from ``cuda.declare_device(..., link=...)``).

Values are hashed by content, never through ``repr`` (NumPy summarizes arrays
over 1,000 elements there, and prints every NaN as ``nan``): floats by their
IEEE bits; arrays by dtype, shape, strides, contiguity, writeability,
alignment and bytes (what Numba types and freezes: ``A.strides[0]`` of a C and
an F array of the same values differ); tuples, lists, dicts, sets,
dataclasses, namedtuples and enums element by element (device functions inside
them are walked like any other); numba types by name. Any other object is
keyed by its type, its own name, its attributes (``__dict__`` / ``__slots__``)
by the same rules, and its classes' namespaces (class attributes, methods,
properties: a ``lower_constant`` may read any of them), so it never costs a
stale binary; objects of the pinned libraries (numba, numpy, ...) by type and
name. Line numbers are keyed wherever the binary carries them (``lineinfo``,
``debug``).
Cycles are cut; nesting deeper than 64 levels is refused with a ``CompileError``.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
import struct
import sys
import sysconfig
import types as pytypes
import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import CompileError
from . import internals, linked

_MAX_DEPTH = 64
# Modules whose contents are pinned by the versions that go into the key.
_PINNED = ("numba", "numpy", "math", "cmath", "operator", "builtins", "cuda", "llvmlite")


def pinned_module(module_name: str | None) -> bool:
    """Whether a module belongs to a library whose version is in the key (numba, numpy, ...)."""
    return isinstance(module_name, str) and module_name.split(".", 1)[0] in _PINNED


def pinned_function(fn: pytypes.FunctionType) -> bool:
    """Whether ``fn`` is a pinned library's own: by its module, or, for the functions such a
    library makes without a module name (``functools.wraps`` over an ``exec``-made function copies
    ``__module__ = None``), by the file its code lives in."""
    if pinned_module(fn.__module__):
        return True
    return fn.__module__ is None and fn.__code__.co_filename.startswith(_pinned_dirs())


_pinned_dir_memo: list[tuple[str, ...]] = []


def _pinned_dirs() -> tuple[str, ...]:
    """The install folders of the pinned libraries that are imported (numba-cuda's too)."""
    if not _pinned_dir_memo:
        dirs = []
        for name in (*_PINNED, "numba_cuda"):
            spec_file = getattr(sys.modules.get(name), "__file__", None)
            if isinstance(spec_file, str):
                dirs.append(os.path.dirname(spec_file) + os.sep)
        dirs.append(internals.package_dir() + os.sep)  # numba.cuda, installed as numba_cuda/numba/cuda
        _pinned_dir_memo.append(tuple(dirs))
    return _pinned_dir_memo[0]


def describe_type(t: Any, depth: int = 0) -> str:
    """A Numba type as a function of the program: its class and its ``key`` (what Numba itself
    compares types by), with what ``str`` leaves out (a namedtuple's field names, in order) and
    without what differs between processes (the per-process counter ``_code``, addresses)."""
    cls = type(t)
    text = str(t).split(" at 0x", 1)[0]  # some types print an address: their key says what it is
    return repr(["numba type", cls.__module__, cls.__qualname__, text, describe_value(t.key, depth + 1)])


def describe_value(k: Any, depth: int = 0) -> Any:
    """A type's key (or a lowering's argument types) as plain data, free of counters and addresses."""
    if depth > _MAX_DEPTH:
        raise CompileError(
            f"a Numba type nests more than {_MAX_DEPTH} levels deep; lazy_kernel cannot key it", name=str(k)
        )
    if isinstance(k, weakref.ref):  # a dispatcher type's key: what it refers to
        k = k()
    if _is_numba_type(k):
        return describe_type(k, depth)
    if k is None or type(k) in (bool, int, float, complex, str, bytes):
        return k
    if isinstance(k, (tuple, list)):
        return [describe_value(x, depth + 1) for x in k]
    if isinstance(k, (set, frozenset)):
        return sorted(repr(describe_value(x, depth + 1)) for x in k)
    if isinstance(k, np.dtype):
        return ["dtype", k.str, str(k.descr)]
    if isinstance(k, type):
        # a namedtuple's class: its fields decide which value `p.hi` reads
        return ["class", k.__module__, k.__qualname__, list(getattr(k, "_fields", ()) or ())]
    # anything else (a dispatcher a first-class function type holds, an enum member, an object):
    # by content, as the key walks globals; its repr may name only a qualname or an address
    return ["value", type(k).__module__, type(k).__qualname__, value_digest(k)]


class _Walker:
    def __init__(self, lines: bool = False) -> None:
        self.lines = lines  # line numbers are compiled in (lineinfo/debug): key every one of them
        self.h = hashlib.sha256()
        self.seen: set[int] = set()  # functions and modules already walked
        self.path: set[int] = set()  # containers being walked now (cycle protection)
        self.links: list[Any] = []
        self.walked: list[pytypes.FunctionType] = []  # the functions walked, in order

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
        if self.lines:  # the line table Numba compiles in: file, first line and every line number
            self.put("lines", co.co_filename, co.co_firstlineno, [line for _, _, line in co.co_lines()])
        for c in co.co_consts:
            if isinstance(c, pytypes.CodeType):
                self.code(c)
            else:
                self.data("<constant>", c, frozenset(), 0)

    def function(self, fn: pytypes.FunctionType) -> None:
        if id(fn) in self.seen:
            self.put("seen", fn.__qualname__)
            return
        self.seen.add(id(fn))
        self.walked.append(fn)
        co = fn.__code__
        self.put("function", fn.__module__, fn.__qualname__)
        self.data("__defaults__", fn.__defaults__, frozenset(), 0)
        self.data("__kwdefaults__", fn.__kwdefaults__, frozenset(), 0)
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

    def value(self, name: str, v: Any, names: frozenset[str], depth: int = 0) -> None:
        """One global (or closure cell, or an element of one) the code refers to."""
        py_func = getattr(v, "py_func", None)
        if isinstance(py_func, pytypes.FunctionType):  # a Numba dispatcher (device function, @jit)
            options = getattr(v, "targetoptions", {})
            self.put("dispatcher", name, sorted((k, _safe_repr(o)) for k, o in options.items()))
            self.links.extend(options.get("link", ()) or ())
            self.function(py_func)
        elif isinstance(v, pytypes.FunctionType):
            if pinned_function(v):
                self.put("pinned function", name, v.__module__, v.__qualname__)
            else:
                self.function(v)
        elif isinstance(v, pytypes.ModuleType):
            self.put("module", name, v.__name__)
            if pinned_module(v.__name__) or id(v) in self.seen:
                return
            self.seen.add(id(v))
            # `mod.attr` puts both names in co_names: follow the attributes it may name.
            for attr in sorted(names):
                if attr in vars(v):
                    self.value(f"{name}.{attr}", vars(v)[attr], names)
        elif isinstance(getattr(v, "_defn", None), pytypes.FunctionType):  # an @intrinsic: its definition
            self.put("intrinsic", name)
            self.function(v._defn)
        elif _is_extern(v):
            self.put("extern", name, v.name, str(v.sig))
            self.links.extend(_extern_links(v))
        else:
            self.data(name, v, names, depth)

    def data(self, name: str, v: Any, names: frozenset[str], depth: int) -> None:
        """A value, by its contents: never through ``repr``, which summarizes large arrays."""
        if depth > _MAX_DEPTH:
            raise CompileError(
                f"global {name!r} nests more than {_MAX_DEPTH} levels deep; lazy_kernel cannot key it",
                name=name,
            )
        t = type(v)
        if v is None or t in (bool, int, float, complex, str):
            self.put("const", t.__name__, _exact_bits(v))
        elif isinstance(v, (int, float, complex, str)) and not isinstance(v, enum.Enum):
            # a subclass (`class N(int)`): Numba freezes the value; its class and attributes follow
            base = next(b for b in (bool, int, float, complex, str) if isinstance(v, b))
            exact = (
                _exact_bits(float(v))
                if isinstance(v, float)
                else _exact_bits(complex(v))
                if isinstance(v, complex)
                else base.__repr__(v)
            )
            self.put("const subclass", t.__module__, t.__qualname__, base.__name__, exact)
            for attr in _attributes(v):
                self.value(f"{name}.{attr}", getattr(v, attr, None), names, depth + 1)
        elif t in (bytes, bytearray):
            self.put("bytes", bytes(v))
        elif isinstance(v, np.ndarray):
            # what Numba types and freezes: layout (strides, contiguity), writeability and alignment too
            # (`A.strides[0]` of a C and an F array of the same values differ)
            flags = v.flags
            layout = (v.strides, flags.c_contiguous, flags.f_contiguous, flags.writeable, flags.aligned)
            self.put("array", v.dtype.str, str(v.dtype.descr), v.shape, layout)
            if v.dtype.hasobject:
                for i, item in enumerate(v.ravel(order="C")):
                    self.value(f"{name}[{i}]", item, names, depth + 1)
            else:
                self.put(hashlib.sha256(_data_bytes(v)).digest())
        elif isinstance(v, np.generic) and not isinstance(v, np.object_):
            self.put("scalar", v.dtype.str, str(v.dtype.descr), _data_bytes(v))
        elif isinstance(v, np.dtype):
            self.put("dtype", v.str, str(v.descr))
        elif id(v) in self.path:
            self.put("cycle", name)
        else:
            self.path.add(id(v))
            try:
                self._composite(name, v, names, depth)
            finally:
                self.path.discard(id(v))

    def _composite(self, name: str, v: Any, names: frozenset[str], depth: int) -> None:
        t = type(v)
        self.put("type", t.__module__, t.__qualname__)
        if isinstance(v, enum.Enum):
            self.put("enum", v.name)
            self.data(f"{name}.value", v.value, names, depth + 1)
        elif isinstance(v, (tuple, list)):  # namedtuples too: the type above names them, with their fields
            self.put(len(v), list(getattr(t, "_fields", ()) or ()))
            for i, item in enumerate(v):
                self.value(f"{name}[{i}]", item, names, depth + 1)
        elif isinstance(v, dict):
            self.put(len(v))
            for i, (k, item) in enumerate(v.items()):
                self.data(f"{name}.key{i}", k, names, depth + 1)
                self.value(f"{name}[{i}]", item, names, depth + 1)
        elif isinstance(v, (set, frozenset)):
            self.put(len(v), sorted(self._digest(f"{name}{{}}", item, names, depth + 1) for item in v))
        elif isinstance(v, type):
            # a namedtuple class: its field order decides which item `Pt(a, b).hi` is
            fields = list(getattr(v, "_fields", ()) or ()) if issubclass(v, tuple) else []
            self.put("class", v.__module__, v.__qualname__, fields)
            if not pinned_module(v.__module__):  # `Color.RED`, `Cfg.N`: follow the attributes the code may name
                for attr in sorted(names):
                    if attr in vars(v):
                        self.value(f"{name}.{attr}", vars(v)[attr], names, depth + 1)
        elif dataclasses.is_dataclass(v):
            for f in dataclasses.fields(v):
                self.value(f"{name}.{f.name}", getattr(v, f.name, None), names, depth + 1)
            self._namespace(name, t, names, depth)
        elif _is_numba_type(v):  # Numba's or a user's: never by attributes (`_code` is a per-process counter)
            self.put(describe_type(v))
        elif pinned_module(t.__module__):
            # numpy ufuncs, CUDA intrinsics: the library versions in the key pin them.
            self.put("pinned", _safe_repr(v), _named(v))
        else:
            # Any other object: its type, its name if it has one, and its attributes, by value; and its
            # class's own namespace (class attributes, methods, properties), which a `lower_constant`
            # may read as well as the instance's (`pyval.factor` with `factor = 2.0` on the class)
            self.put("object", _named(v))
            for attr in _attributes(v):
                self.value(f"{name}.{attr}", getattr(v, attr, None), names, depth + 1)
            self._namespace(name, t, names, depth)

    def _namespace(self, name: str, cls: type, names: frozenset[str], depth: int) -> None:
        """Every class of ``cls``'s MRO that is the user's (:func:`_installed_class`), by its namespace: data by value,
        functions, properties, static and class methods by their code (walked as any function)."""
        for klass in cls.__mro__:
            if pinned_module(klass.__module__) or _installed_class(klass) or id(klass) in self.seen:
                continue
            self.seen.add(id(klass))
            self.put("namespace", klass.__module__, klass.__qualname__)
            for attr, item in sorted(vars(klass).items(), key=lambda kv: str(kv[0])):
                if attr in _CLASS_BOOKKEEPING:
                    continue
                if isinstance(item, property):
                    parts = [item.fget, item.fset, item.fdel]
                elif isinstance(item, (staticmethod, classmethod)):
                    parts = [item.__func__]
                elif hasattr(item, "__set_name__") and isinstance(getattr(item, "func", None), pytypes.FunctionType):
                    parts = [item.func]  # functools.cached_property and its kind
                else:
                    parts = [item]
                for i, part in enumerate(parts):
                    if part is not None and not _is_descriptor_of_slots(part):
                        self.value(f"{name}.<{klass.__qualname__}>.{attr}[{i}]", part, names, depth + 1)

    def _digest(self, name: str, v: Any, names: frozenset[str], depth: int) -> str:
        """Digest of one value on its own (set elements are hashed in sorted order)."""
        sub = _Walker()
        sub.seen, sub.path, sub.links, sub.walked = self.seen, self.path, self.links, self.walked
        sub.value(name, v, names, depth)
        return sub.h.hexdigest()


_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (not written in C)
_installed_memo: list[tuple[str, ...]] = []


def _installed_class(klass: type) -> bool:
    """A class written in C, or one of an installed library or the standard library (its module's file in
    site-packages or the stdlib): it changes only with an upgrade, and its methods reach that library's
    mutable state (registries, caches), which would make the key differ from process to process. The
    user's own classes (scripts, an editable checkout, notebooks) are walked."""
    if not klass.__flags__ & _HEAP_TYPE:
        return True
    path = getattr(sys.modules.get(klass.__module__), "__file__", None)
    if not isinstance(path, str):
        return False  # __main__ of a notebook, an exec'd module: the user's
    if not _installed_memo:
        paths = sysconfig.get_paths()
        roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
        roots |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
        _installed_memo.append(tuple(os.path.join(os.path.realpath(r), "") for r in roots))
    return os.path.realpath(path).startswith(_installed_memo[0])


# a class's entries that say nothing about its behaviour (or hold the class itself)
_CLASS_BOOKKEEPING = frozenset(
    {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__", "__annotations__",
     "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__", "_abc_impl"}
)  # fmt: skip


def _is_descriptor_of_slots(v: Any) -> bool:
    """A ``__slots__`` member or getset descriptor: the instance's attributes carry its values."""
    return type(v).__name__ in ("member_descriptor", "getset_descriptor", "wrapper_descriptor", "method_descriptor")


def _exact_bits(v: Any) -> Any:
    """A constant as exactly what Numba freezes: a float (or complex) by its IEEE bits, so NaN payloads
    and -0.0 count, which ``repr`` ("nan") drops; anything else by ``repr``."""
    if isinstance(v, float):
        return ["float bits", struct.pack("<d", v).hex()]
    if isinstance(v, complex):
        return ["complex bits", struct.pack("<dd", v.real, v.imag).hex()]
    return v


def _data_bytes(v: Any) -> bytes:
    """An array's or scalar's data: a structured dtype field by field, never its padding bytes
    (an aligned record array made by ``np.array`` leaves them uninitialized: they differ per process)."""
    names = v.dtype.names
    if not names:
        return bytes(np.ascontiguousarray(v).tobytes())
    return b"".join(_data_bytes(np.asarray(v[name])) for name in names)


def _all_names(co: pytypes.CodeType) -> frozenset[str]:
    names = set(co.co_names)
    for c in co.co_consts:
        if isinstance(c, pytypes.CodeType):
            names |= _all_names(c)
    return frozenset(names)


def _is_numba_type(v: Any) -> bool:
    from numba.core.types import Type

    return isinstance(v, Type)


def _named(v: Any) -> list[str]:
    """The module and name an object carries itself (builtins, ufuncs, classes), if any."""
    return [
        x
        for x in (getattr(v, "__module__", None), getattr(v, "__qualname__", getattr(v, "__name__", None)))
        if isinstance(x, str)
    ]


def _attributes(v: Any) -> list[str]:
    names = list(getattr(v, "__dict__", {}) or {})
    for cls in type(v).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    return sorted(set(n for n in names if isinstance(n, str) and n not in ("__dict__", "__weakref__")))


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
    """(name, sha256 of contents[, "cu", numba-cuda's extra search path]) for each linked file or code object.

    CUDA C++ (a ``.cu`` path or a ``CUSource``) is compiled by numba-cuda through NVRTC: the headers
    it reads are not keyed here (that would lex it on every lookup) but recorded when the kernel
    compiles and verified by stat when it loads (:mod:`.linked`); the extra search path, which
    decides where they are found, is keyed.
    """
    out = []
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            path = os.fspath(item)
            data = linked.read_regular(path)
            record = [os.path.basename(path), hashlib.sha256(data).hexdigest() if data is not None else "unreadable"]
            cu = path.endswith(".cu") and data is not None
        else:
            data = getattr(item, "data", b"")
            if isinstance(data, str):
                data = data.encode()
            record = [_link_name(item), hashlib.sha256(bytes(data)).hexdigest()]
            cu = getattr(item, "kind", None) == "cu"
        if cu:
            record += ["cu", ":".join(linked.extra_dirs())]
        out.append(record)
    return out


def linked_items(pyfunc: pytypes.FunctionType, link: Iterable[Any] = ()) -> list[Any]:
    """Every file and code object linked into ``pyfunc``'s kernel: ``link`` and what its
    ``cuda.declare_device`` functions link (as :func:`fingerprint` keys them)."""
    w = _Walker()
    w.function(pyfunc)
    return [*link, *w.links]


def lines_compiled(options: dict[str, Any]) -> bool:
    """Whether the binary carries line numbers: ``lineinfo``, or ``debug`` (its debug info has them too)."""
    return bool(options.get("lineinfo") or options.get("debug"))


def fingerprint(
    pyfunc: pytypes.FunctionType, link: Iterable[Any] = (), *, lines: bool = False
) -> tuple[str, list[list[str]]]:
    """sha256 over the kernel, everything it reaches, and its linked files' contents; with
    ``lines`` (lineinfo or debug compiled in) every reached function's line table too.

    Returns ``(digest, links)`` where ``links`` lists each linked file's name and digest.
    """
    w = _Walker(lines)
    w.put("python", sys.version_info[:2])
    w.function(pyfunc)
    links = link_digest([*link, *w.links])
    w.put("links", links)
    return w.h.hexdigest(), links


def function_digest(fn: pytypes.FunctionType, *, lines: bool = False) -> str:
    """sha256 of one function as :func:`fingerprint` sees it: bytecode, constants, nested code,
    defaults, closure cells and the values it reaches (not its linked files)."""
    w = _Walker(lines)
    w.function(fn)
    return w.h.hexdigest()


# Digests of functions, per function object and line mode: a warm load rehashes nothing it hashed.
_digests: weakref.WeakKeyDictionary[pytypes.FunctionType, dict[bool, str]] = weakref.WeakKeyDictionary()


def function_digest_memo(fn: pytypes.FunctionType, lines: bool) -> str:
    """:func:`function_digest`, computed once per function object and line mode in a process."""
    memo = _digests.setdefault(fn, {})
    if lines not in memo:
        memo[lines] = function_digest(fn, lines=lines)
    return memo[lines]


def value_digest(v: Any, *, lines: bool = False) -> str:
    """sha256 of one value by content (functions and dispatchers in it walked as in :func:`fingerprint`)."""
    w = _Walker(lines)
    w.value("<value>", v, frozenset())
    return w.h.hexdigest()


def reached_functions(pyfunc: pytypes.FunctionType) -> list[pytypes.FunctionType]:
    """The functions :func:`fingerprint` walks from ``pyfunc`` (the first key covers them)."""
    w = _Walker()
    w.function(pyfunc)
    return w.walked

"""CUDA C++ -> cubin (or PTX / LTO-IR) through NVRTC, with no GPU needed.

Two routes, both through the cuda.core stack that numba-cuda itself wraps:

* ``"nvrtc"`` (default): one ``Program(...).compile("cubin")`` call.
* ``"lto"``: NVRTC to LTO-IR, then nvJitLink to a cubin, the route that can
  also link fragments into Numba-Python kernels.

Options are NVRTC command-line flags, kept in the caller's order. They are
parsed into ``cuda.core.ProgramOptions``; anything we do not recognise is
refused rather than passed on, so an option list can never smuggle in an
output path or a second input.

Every compile is also *observed* (``_tracer``): the same exact bytes are compiled again, traced, in
a child process (a traced compile can crash NVRTC), and that compile's own binary and the record of
what it read (``_manifest``) are one observation: what the store keeps. This process's untraced
compile, run meanwhile, only serves the caller first. If the observed compile fails, the binary is
served from memory and never stored. :func:`compile_source` waits for the observation and keeps
its record only when the two binaries are equal; :func:`compile_deferred` (what a family's cold
compile uses) returns the served binary as soon as it is ready, with a :class:`Trace` whose
``result()`` waits for the observed one. Under :func:`observed_only` (``lazykern warm``, where
nobody waits for the binary) only the observed compile runs.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from .. import _fork, config
from ..errors import CompileError, LazykernWarning, warn_user
from . import _manifest, _tracer

log = logging.getLogger("lazykern")

TARGETS = ("cubin", "ptx", "ltoir")
ROUTES = ("nvrtc", "lto")
DEFAULT_ARCH = "sm_90"
_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$")


@dataclasses.dataclass(frozen=True)
class CompileResult:
    """What one NVRTC call produced."""

    code: bytes
    target: str
    arch: str
    name: str
    options: tuple[str, ...]
    log: str
    seconds: float
    # What the compile read besides the source (see lazykern.compile._manifest), and why the
    # binary must not be persisted ("" when it may be).
    headers: dict[str, Any] | None = None
    memory_only: str = ""


NVRTC_MISSING = "NVRTC is missing: install lazykern[cu13] (or lazykern[cu12] for a CUDA 12 driver)"


def nvrtc_missing(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the NVRTC library could not be found or loaded."""
    try:
        from cuda.pathfinder import DynamicLibNotAvailableError, DynamicLibNotFoundError
    except ImportError:  # no cuda.pathfinder: no CUDA extra at all
        return True
    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, (DynamicLibNotFoundError, DynamicLibNotAvailableError)) and "nvrtc" in str(cur).lower():
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _nvrtc() -> Any:  # cuda.bindings.nvrtc, which has no types
    """The NVRTC bindings, loaded: a missing library is one CompileError line, not a loader traceback."""
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception as exc:
        if nvrtc_missing(exc):
            log.debug("NVRTC could not be loaded", exc_info=True)
            raise CompileError(NVRTC_MISSING, name="nvrtc") from None
        raise
    return nvrtc


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """The NVRTC version that compiles here, e.g. ``(13, 0)``."""
    err, major, minor = _nvrtc().nvrtcVersion()
    if int(err) != 0:
        raise CompileError("NVRTC could not report its version", name="nvrtc", log=str(err))
    return int(major), int(minor)


@functools.cache
def supported_archs() -> tuple[str, ...]:
    """The archs this NVRTC can compile cubins for, e.g. ``("sm_75", ..., "sm_120")``."""
    err, archs = _nvrtc().nvrtcGetSupportedArchs()
    if int(err) != 0:
        raise CompileError("NVRTC could not list the archs it supports", name="nvrtc", log=str(err))
    return tuple(f"sm_{a}" for a in archs)


def check_arch(arch: str) -> str:
    """``arch`` (normalized) if this NVRTC compiles for it; else a ValueError listing those it does."""
    arch = normalize_arch(arch)
    base = arch.rstrip("af")
    supported = supported_archs()
    if base not in supported:
        major, minor = nvrtc_version()
        raise ValueError(
            f"arch {arch} is not one NVRTC {major}.{minor} compiles for; use one of {', '.join(supported)}"
        )
    return arch


def normalize_arch(arch: str | tuple[int, int] | None) -> str:
    """``"sm_90"``, ``"90"``, ``(9, 0)`` or ``None`` (current device) -> ``"sm_90"``."""
    if arch is None:
        return current_arch()
    if isinstance(arch, tuple):
        return arch_of(arch)
    text = str(arch).strip().lower()
    if text.isdigit():
        text = f"sm_{text}"
    if text.startswith("compute_"):
        text = "sm_" + text[len("compute_") :]
    if not _ARCH_RE.match(text):
        raise ValueError(f"arch must look like 'sm_90' (or a (major, minor) tuple), got {arch!r}")
    return text


def arch_of(cc: Sequence[int]) -> str:
    """``sm_XY`` for compute capability ``(X, Y)``: the one place that spells an arch from one."""
    return f"sm_{cc[0]}{cc[1]}"


def current_arch() -> str:
    """Arch of the current CUDA device, else ``LAZYKERN_ARCH``, else ``sm_90``.

    Memoized per CUDA context, so asking again costs one driver call (0.2 us).
    """
    env = config.arch_override()
    if env:
        return normalize_arch(env)
    ctx = _context_handle()
    arch = _arch_by_context.get(ctx) if ctx else None
    if arch is not None:
        return arch
    if not ctx and _arch_by_context.get(0):
        return _arch_by_context[0]
    cc = device_compute_capability()
    if cc is None:
        log.info("no CUDA device found; compiling for the default arch %s", DEFAULT_ARCH)
        _arch_by_context[0] = DEFAULT_ARCH  # no GPU now means none for this process
        return DEFAULT_ARCH
    arch = arch_of(cc)
    ctx = _context_handle()
    if ctx:
        _arch_by_context[ctx] = arch
    return arch


_arch_by_context: dict[int, str] = {}


def _context_handle() -> int:
    global _no_driver
    if _no_driver:
        return 0
    try:
        from cuda.bindings.driver import cuCtxGetCurrent

        err, ctx = cuCtxGetCurrent()
        return int(ctx) if int(err) == 0 else 0
    except Exception:  # no libcuda at all: remember, asking again costs milliseconds
        _no_driver = True
        return 0


_no_driver = False


def device_compute_capability() -> tuple[int, int] | None:
    """Compute capability of Numba's current device, or None where there is no GPU.

    Asks the driver directly: ``numba.cuda.is_available()`` would load NVVM
    (8 ms) on the warm-cache path, which needs no compiler at all.
    """
    try:
        from numba import cuda

        if cuda.config.ENABLE_CUDASIM:
            return None
        return tuple(cuda.get_current_device().compute_capability)
    except Exception:  # no driver, no device: both mean "no GPU"
        return None


_include_dirs: tuple[str, ...] | None = None  # this process's answer (searched, or remembered by the toolchain memo)


def system_include_dirs() -> tuple[str, ...]:
    """The CUDA runtime and CCCL header directories (the ones numba-cuda's NVRTC route uses).

    Found through cuda.pathfinder (~50x cheaper than numba's own search, still a quarter
    millisecond of directory listings), once per process; a warm process takes them from the
    store's toolchain memo instead (:func:`remember_system_include_dirs`), searching nothing.
    """
    global _include_dirs
    dirs = _include_dirs
    if dirs is None:
        dirs = _include_dirs = _find_system_include_dirs()
    return dirs


def remember_system_include_dirs(dirs: tuple[str, ...]) -> None:
    """Take ``dirs`` as this process's toolkit header directories, unless it searched already: what
    ``lazykern.store._toolchain_memo`` found recorded, with every directory's stat unchanged."""
    global _include_dirs
    if _include_dirs is None:
        _include_dirs = tuple(dirs)


def forget_system_include_dirs() -> None:
    """Search again on next use (tests that move the toolkit under a running process)."""
    global _include_dirs
    _include_dirs = None


def _find_system_include_dirs() -> tuple[str, ...]:
    from cuda.pathfinder import locate_nvidia_header_directory

    dirs: list[str] = []
    for name in ("cudart", "cccl"):
        try:
            found = locate_nvidia_header_directory(name)
        except Exception as exc:  # headers are optional for kernels that include nothing
            log.debug("no %s headers found: %s", name, exc)
            continue
        if found is not None and os.path.isdir(found.abs_path):
            dirs.append(found.abs_path)
    return tuple(dirs)


@functools.cache
def toolchain_fingerprint() -> str:
    """Digest of what besides the source decides the output: NVRTC, CCCL and numba-cuda versions.

    numba-cuda is included because it supplies the header search paths and the
    linker of the LTO route: upgrading it must not return entries it did not make.
    Loads NVRTC (milliseconds); ``lazykern.store._toolchain_memo`` remembers it per store and environment.
    """
    h = hashlib.sha256(repr(nvrtc_version()).encode())
    h.update(f"numba-cuda {numba_cuda_version()}".encode())
    for d in system_include_dirs():
        version_h = Path(d, "cuda", "std", "__cccl", "version.h")
        if version_h.is_file():
            h.update(version_h.read_bytes())
    # nvrtcVersion() says 13.4 for 13.4.59 and 13.4.92 alike, whose cubins differ (each embeds its
    # build, and a patch release may fix codegen): the libraries themselves stand for the build
    for library in _nvrtc_library_files():
        h.update(_library_identity(library).encode())
    return h.hexdigest()


def _nvrtc_library_files() -> list[Path]:
    headers = _nvrtc_header_dir()
    return [] if headers is None else _nvrtc_libraries(headers.parent)


_IDENTITY_BYTES = 1 << 20
_identities: dict[tuple[str, int, int, int, int], str] = {}


def _library_identity(path: Path) -> str:
    """A library build, the same on every machine: its name, size and sha256 of its first and last MiB
    (its ELF headers and tables, its version notes; a few milliseconds, not 150 MB read). Remembered per
    process by the file's stat; the store's toolchain memo remembers the fingerprint across processes."""
    try:
        st = path.stat()
        stat_key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        known = _identities.get(stat_key)
        if known is not None:
            return known
        with open(path, "rb") as fh:
            head = fh.read(_IDENTITY_BYTES)
            fh.seek(max(st.st_size - _IDENTITY_BYTES, 0))
            tail = fh.read(_IDENTITY_BYTES)
    except OSError as exc:
        return f"{path.name}: unreadable ({exc.strerror})"
    digest = hashlib.sha256(head + tail).hexdigest()
    _identities[stat_key] = found = f"{path.name} {st.st_size} {digest}"
    return found


def numba_cuda_version() -> str:
    """numba-cuda's version from the package itself (importlib.metadata costs milliseconds).

    Not imported for this (half a millisecond of a warm start that may never need Numba): the
    imported module's version if there is one, else the ``VERSION`` file it reads its own from.
    """
    module = sys.modules.get("numba_cuda")
    if module is not None:
        return str(module.__version__)
    try:
        spec = importlib.util.find_spec("numba_cuda")
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return "absent"
    try:  # plain reads: a text file object costs more than the read (a fresh process's first kernel)
        fd = os.open(os.path.join(os.path.dirname(spec.origin), "VERSION"), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            chunks = [os.read(fd, 4096)]
            while chunks[-1]:
                chunks.append(os.read(fd, 4096))
        finally:
            os.close(fd)
        return b"".join(chunks).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n").strip()
    except OSError:  # a layout without the file: ask the package itself
        try:
            import numba_cuda

            return str(numba_cuda.__version__)
        except ImportError:
            return "absent"


TOOLCHAIN_ENV = ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX")  # steer where NVRTC is found


def toolchain_files() -> list[Path]:
    """The files whose identity stands for the toolchain: CCCL's ``version.h``, ``nvrtc.h``, the
    NVRTC libraries beside it (their directory too, so an added library is noticed)."""

    files = [Path(d, "cuda", "std", "__cccl", "version.h") for d in system_include_dirs()]
    headers = _nvrtc_header_dir()
    if headers is not None:
        files.append(headers / "nvrtc.h")
        files.extend(_nvrtc_libraries(headers.parent))
    return files


def _nvrtc_header_dir() -> Path | None:
    """The directory of ``nvrtc.h`` (its libraries sit in a ``lib*`` beside it), or None."""
    try:
        from cuda.pathfinder import locate_nvidia_header_directory

        found = locate_nvidia_header_directory("nvrtc")
    except Exception as exc:
        log.debug("no nvrtc.h found: %s", exc)
        return None
    return None if found is None else Path(found.abs_path)


def _nvrtc_libraries(root: Path) -> list[Path]:
    """``root/lib*/libnvrtc*.so*``, sorted; listed by hand: ``glob`` compiles regexes on the warm path."""
    out = []
    for sub in sorted(os.listdir(root)):
        if sub.startswith("lib") and os.path.isdir(root / sub):
            out += [root / sub / n for n in sorted(os.listdir(root / sub)) if n.startswith("libnvrtc") and ".so" in n]
    return out


# NVRTC flags we accept, mapped to ProgramOptions fields. Each parser gets the
# flag's value (or None for a bare switch) and returns (field, value, append).
def _flag(field: str) -> Callable[[str | None], tuple[str, object, bool]]:
    return lambda v: (field, True if v is None else v.lower() in ("1", "true", "on", "yes"), False)


def _value(field: str, conv: Callable[[str], object] = str) -> Callable[[str | None], tuple[str, object, bool]]:
    def parse(v: str | None) -> tuple[str, object, bool]:
        if v is None or v == "":
            raise ValueError(f"needs a value (e.g. {field}=...)")
        return field, conv(v), False

    return parse


def _listed(field: str) -> Callable[[str | None], tuple[str, object, bool]]:
    def parse(v: str | None) -> tuple[str, object, bool]:
        if not v:
            raise ValueError("needs a value")
        return field, v, True

    return parse


_OPTIONS: dict[str, Callable[[str | None], tuple[str, object, bool]]] = {
    "-std": _value("std"),
    "--std": _value("std"),
    "--use_fast_math": _flag("use_fast_math"),
    "-use_fast_math": _flag("use_fast_math"),
    "--ftz": _flag("ftz"),
    "--prec-div": _flag("prec_div"),
    "--prec-sqrt": _flag("prec_sqrt"),
    "--fmad": _flag("fma"),
    "-D": _listed("define_macro"),
    "--define-macro": _listed("define_macro"),
    "-U": _listed("undefine_macro"),
    "--undefine-macro": _listed("undefine_macro"),
    "-I": _listed("include_path"),
    "--include-path": _listed("include_path"),
    "-maxrregcount": _value("max_register_count", int),
    "--maxrregcount": _value("max_register_count", int),
    "-lineinfo": _flag("lineinfo"),
    "--generate-line-info": _flag("lineinfo"),
    "-G": _flag("debug"),
    "--device-debug": _flag("debug"),
    "--extra-device-vectorization": _flag("extra_device_vectorization"),
    "-w": _flag("disable_warnings"),
    "--disable-warnings": _flag("disable_warnings"),
    "--restrict": _flag("restrict"),
    "--device-int128": _flag("device_int128"),
    "-Xptxas": _listed("ptxas_options"),
    "--ptxas-options": _listed("ptxas_options"),
}
_SHORT_JOINED = ("-D", "-U", "-I")


def parse_options(options: Sequence[str], *, name: str = "<options>") -> dict[str, object]:
    """NVRTC flags (in order) -> keyword arguments of ``cuda.core.ProgramOptions``.

    >>> parse_options(["-std=c++17", "-DTILE=64", "--use_fast_math"])
    {'std': 'c++17', 'define_macro': ['TILE=64'], 'use_fast_math': True}
    """
    if isinstance(options, (str, bytes)):
        raise TypeError(f"options must be a sequence of strings, got one {type(options).__name__}: wrap it in a list")
    kwargs: dict[str, object] = {}
    items = list(options)
    i = 0
    while i < len(items):
        opt = items[i]
        if not isinstance(opt, str):
            raise TypeError(f"compile options must be strings, got {type(opt).__name__} ({opt!r})")
        if any(c in opt for c in "\0\n\r"):
            raise CompileError(f"compile option {opt!r} contains a NUL or line break", name=name, options=options)
        flag, value = opt, None
        if opt[:2] in _SHORT_JOINED and len(opt) > 2:
            flag, value = opt[:2], opt[2:]
        elif "=" in opt:
            flag, value = opt.split("=", 1)
        elif opt in ("-D", "-U", "-I", "-Xptxas", "-maxrregcount") and i + 1 < len(items):
            i += 1
            value = items[i]
        parser = _OPTIONS.get(flag)
        if parser is None:
            hint = " (pass arch=... instead)" if flag.lstrip("-") in ("arch", "gpu-architecture") else ""
            raise CompileError(
                f"unsupported or unsafe NVRTC option {opt!r}{hint}; allowed: {sorted(_OPTIONS)}",
                name=name,
                options=options,
            )
        try:
            field, val, append = parser(value)
        except ValueError as exc:
            raise CompileError(f"bad value in option {opt!r}: {exc}", name=name, options=options) from None
        if append:
            cast("list[object]", kwargs.setdefault(field, [])).append(val)  # an appended option's value is a list
        else:
            kwargs[field] = val
        i += 1
    return kwargs


@_fork.native  # NVRTC: a child forked mid-compile must not call it in-process
def compile_source(
    source: str,
    *,
    name: str,
    arch: str | tuple[int, int] | None = None,
    options: Sequence[str] = (),
    target: str = "cubin",
    route: str = "nvrtc",
) -> CompileResult:
    """Compile one translation unit. Raises CompileError with the full log.

    ``headers`` is set only when the observed compile gave this very binary (see the module).

    >>> r = compile_source('extern "C" __global__ void k(int *a){ *a = 1; }', name="k", arch="sm_80")
    >>> r.target, r.arch, r.code[:4]
    ('cubin', 'sm_80', b'\\x7fELF')
    """
    result, trace = _compile(source, name=name, arch=arch, options=options, target=target, route=route)
    if trace is None:
        return result
    code, headers, memory_only = trace.result(result)
    if headers is not None and code != result.code:
        headers, memory_only = None, "the observed compile gave another binary than this one"
    return dataclasses.replace(result, headers=headers, memory_only=memory_only)


_observed_only: contextvars.ContextVar[bool] = contextvars.ContextVar("lazykern_observed_only", default=False)


@contextlib.contextmanager
def observed_only() -> Iterator[None]:
    """Compiles inside run once, observed (in a compile server): for ahead-of-time work (``lazykern
    warm``), where nobody waits for the binary and a second compile would only cost CPU."""
    token = _observed_only.set(True)
    try:
        yield
    finally:
        _observed_only.reset(token)


def compile_deferred(
    source: str,
    *,
    name: str,
    arch: str | tuple[int, int] | None = None,
    options: Sequence[str] = (),
    target: str = "cubin",
    route: str = "nvrtc",
) -> tuple[CompileResult, Trace | None]:
    """:func:`compile_source` that returns as soon as the served binary is ready: the observed
    compile may still run; ``trace.result()`` waits for it (``(its binary, headers, memory_only)``:
    store that binary, never ``result.code``, with those headers). With no trace the result is
    complete (``headers``/``memory_only`` set, for ``result.code``)."""
    if _fork.tainted():  # NVRTC runs in a fresh process here, which returns only what pickles
        return compile_source(source, name=name, arch=arch, options=options, target=target, route=route), None
    if _observed_only.get():
        observed = _observe(source, name=name, arch=arch, options=options, target=target, route=route)
        if observed is not None:
            return observed, None
    with _fork.inside_native():
        return _compile(source, name=name, arch=arch, options=options, target=target, route=route)


def _observe(
    source: str, *, name: str, arch: str | tuple[int, int] | None, options: Sequence[str], target: str, route: str
) -> CompileResult | None:
    """The observed compile alone, as a complete result; None when it did not give one (then the
    caller compiles here, and NVRTC's own error, if any, is raised from this process)."""
    arch, options, kwargs, search_dirs, lto, traced = _prepare(
        source, name=name, arch=arch, options=options, target=target, route=route
    )
    if not traced:
        return None
    start = time.perf_counter()
    trace = Trace(
        source=source, name=name, arch=arch, target=target, lto=lto, search_dirs=search_dirs,
        started=_manifest.start_ns(), kwargs=kwargs, quiet=True,
    )  # fmt: skip
    code, headers, memory_only = trace.result(None)
    if code is None:
        log.debug("observed compile of %s gave no binary (%s): compiling here", name, memory_only)
        return None
    seconds = time.perf_counter() - start
    return CompileResult(code, target, arch, name, options, "", seconds, headers=headers, memory_only=memory_only)


class Trace:
    """The observed compile of one translation unit, running in a compile server (``_tracer``): its
    binary and the record of what it read, together (one observation, stored as one entry)."""

    def __init__(
        self,
        *,
        source: str,
        name: str,
        arch: str,
        target: str,
        lto: bool,
        search_dirs: Sequence[str],
        started: int,
        kwargs: dict[str, Any],
        quiet: bool = False,
    ) -> None:
        self._source, self._name, self._arch, self._search_dirs = source, name, arch, search_dirs
        self._started, self._kwargs, self._lto, self._quiet = started, kwargs, lto, quiet
        self._lock = _fork.lock()
        self._result: tuple[bytes | None, dict[str, Any] | None, str] | None = None
        self._pending: _tracer.Pending | None = None
        self._unsent = ""
        try:
            # Relative names are NVRTC's from the working directory of now: the server compiles
            # there (or refuses, if it was replaced) and the record reads there, whatever chdir follows.
            self._cwd = os.getcwd()
            here = os.stat(self._cwd)
            self._anchors = _manifest.anchors(search_dirs, self._cwd)
            self._pending = _tracer.begin(
                source,
                name=name,
                arch=arch,
                options=kwargs,
                target="ltoir" if lto else target,
                cwd=self._cwd,
                cwd_id=(here.st_dev, here.st_ino),
                nice=not quiet,  # observed only: nobody is served first, the observed compile is awaited
            )
        except Exception as exc:  # the binary is kept in memory; the reason says why
            log.debug("the observed compile of %s could not be sent", name, exc_info=True)
            self._unsent = f"the observed compile could not be sent ({type(exc).__name__}: {exc})"

    def result(self, served: CompileResult | None) -> tuple[bytes | None, dict[str, Any] | None, str]:
        """``(binary, manifest, "")`` of the observed compile, or ``(None, None, why the binary stays
        in memory)``; waits for it (once: later calls give the same answer). ``served``: the untraced
        compile's result (its time bounds the observed one's). Where no compile server could run at
        all, ``served``'s binary is kept with the record of a source that reads nothing, as where NVRTC
        cannot trace."""
        with self._lock:
            if self._result is None:
                self._result = self._collect(_tracer.bound(served.seconds if served else None))
                if self._result[0] is None and served is not None and not self._ran():
                    headers, why = _headers_read(
                        self._source, self._name, self._search_dirs, self._started, self._kwargs
                    )
                    self._result = (served.code, headers, "") if headers is not None else (None, None, why)
            return self._result

    def _ran(self) -> bool:
        return self._pending is not None and self._pending.ran

    def discard(self) -> None:
        """The compile failed: nothing to record, but the server's answer must be collected."""
        with self._lock:
            if self._result is None:
                if self._pending is not None:
                    self._pending.wait(_tracer.bound(None))
                self._result = (None, None, "the compile failed")

    def _collect(self, bound: float) -> tuple[bytes | None, dict[str, Any] | None, str]:
        if self._pending is None:
            return None, None, self._unsent
        answer, why = self._pending.wait(bound)
        if answer is None:
            if why.startswith("NVRTC's observed compile crashed") and not self._quiet:
                said = f"the observed compile of {self._name!r} failed: {why}; its binary stays in memory"
                warn_user(said, LazykernWarning)
            else:
                log.warning("kernel %s is kept in memory only: %s", self._name, why)
            return None, None, why
        try:
            code = base64.b64decode(answer["code"])
            if self._lto:
                from cuda.core import ObjectCode

                code = bytes(_link_lto(ObjectCode.from_ltoir(code), self._arch, self._kwargs).code)
            events = [(int(ts), int(dur), str(path)) for ts, dur, path in answer.get("events", [])]
        except Exception as exc:
            return None, None, f"the observed compile's answer cannot be used ({type(exc).__name__}: {exc})"
        headers, why = _manifest.record(
            events,
            source=self._source,
            main_dir=os.path.dirname(self._name),
            search_dirs=self._search_dirs,
            started=self._started,
            pinned_dirs=system_include_dirs(),
            defines=cast("list[str]", self._kwargs.get("define_macro", [])),  # parse_options: a list of str
            cwd=self._cwd,
            anchors=self._anchors,
        )
        if headers is None:
            return None, None, why
        return code, headers, ""


def _prepare(
    source: str,
    *,
    name: str,
    arch: str | tuple[int, int] | None,
    options: Sequence[str],
    target: str,
    route: str,
) -> tuple[str, tuple[str, ...], dict[str, Any], list[str], bool, bool]:
    """``(arch, options, ProgramOptions keywords, search directories, lto, observed)`` of a compile
    (``observed``: NVRTC can trace it here); raises what :func:`_compile` raises for bad arguments."""
    arch = normalize_arch(arch)
    if isinstance(options, (str, bytes)):
        raise TypeError(f"options must be a sequence of strings, got one {type(options).__name__}: wrap it in a list")
    options = tuple(options)
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    if not isinstance(source, str):
        raise TypeError(f"source must be str, got {type(source).__name__}")
    kwargs = parse_options(options, name=name)
    search_dirs = [*cast("list[str]", kwargs.get("include_path", [])), *system_include_dirs()]  # parse_options: a list
    kwargs["include_path"] = search_dirs
    lto = route == "lto" and target == "cubin"
    if lto:
        kwargs.update(relocatable_device_code=True, link_time_optimization=True)
    check_arch(arch)
    return arch, options, kwargs, search_dirs, lto, _traces_headers()


def _compile(
    source: str,
    *,
    name: str,
    arch: str | tuple[int, int] | None,
    options: Sequence[str],
    target: str,
    route: str,
) -> tuple[CompileResult, Trace | None]:
    from cuda.core import Program, ProgramOptions

    arch, options, kwargs, search_dirs, lto, traced = _prepare(
        source, name=name, arch=arch, options=options, target=target, route=route
    )
    logs = _Log()
    start = time.perf_counter()
    started = _manifest.start_ns()
    program = None
    # Always observed (a text test can be fooled by a splice), never here: a traced compile can crash
    # NVRTC, so it runs in a compile server (_tracer) while this process compiles untraced.
    trace = None
    if traced:
        trace = Trace(
            source=source, name=name, arch=arch, target=target, lto=lto, search_dirs=search_dirs,
            started=started, kwargs=kwargs,
        )  # fmt: skip
    try:
        program = Program(source, "c++", options=ProgramOptions(arch=arch, name=name, **kwargs))
        obj = program.compile("ltoir" if lto else target, logs=logs)
        if lto:
            obj = _link_lto(obj, arch, kwargs)
        code = bytes(obj.code) if not isinstance(obj.code, str) else obj.code.encode()
    except BaseException as exc:
        if trace is not None:
            trace.discard()  # its server is needed again
        if not isinstance(exc, Exception) or isinstance(exc, CompileError):
            raise
        # The log goes into the CompileError once; cuda.core's own error repeats it, so it is not chained.
        log.debug("NVRTC failed on %s; full source:\n%s", name, _numbered(source), exc_info=True)
        if nvrtc_missing(exc):
            raise CompileError(NVRTC_MISSING, name=name, arch=arch) from None
        text = logs.text() or _LOG_PREFIX.sub("", str(exc)).strip()
        raise CompileError(
            f"NVRTC failed to compile {name!r}: {_first_error(text) or _first_line(exc)}",
            name=name,
            arch=arch,
            options=options,
            log=text,
            source=source,
        ) from None
    finally:
        # A traceback keeps this frame alive in a reference cycle; a Program collected through a
        # cycle raises in __dealloc__ (NVIDIA/cuda-python#2876, fixed by #2879): let go of it here.
        program = None  # noqa: F841
    seconds = time.perf_counter() - start
    log.debug("compiled %s for %s in %.3f s", name, arch, seconds)
    result = CompileResult(code, target, arch, name, options, logs.text(), seconds)
    if trace is None:  # nothing traced: decided from the source alone, now
        headers, memory_only = _headers_read(source, name, search_dirs, started, kwargs)
        return dataclasses.replace(result, headers=headers, memory_only=memory_only), None
    return result, trace


@functools.cache
def _traces_headers() -> bool:
    """Whether this NVRTC takes ``--fdevice-time-trace`` (13.x does; older: one tiny compile to find out)."""
    from cuda.core import Program, ProgramOptions

    if nvrtc_version() >= (13, 0):
        return True

    with tempfile.TemporaryDirectory(prefix="lazykern-trace-") as d:
        try:
            opts = ProgramOptions(arch="sm_80", fdevice_time_trace=os.path.join(d, "probe"))
            Program("__global__ void k() {}", "c++", options=opts).compile("cubin")
        except Exception as exc:
            log.info("NVRTC cannot trace the headers it reads (%s): kernels with #include stay in memory", exc)
            return False
        return os.path.isfile(os.path.join(d, "probe.json"))


def _headers_read(
    source: str, name: str, search_dirs: Sequence[str], started: int, kwargs: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """(manifest, "") of a compile NVRTC could not trace, or (None, why the binary must stay in memory).

    Only a source in which the scan (which only adds) finds no include, probe or clock is
    persisted: there is nothing it can have read.
    """
    headers, why = _manifest.record(
        (),
        source=source,
        main_dir=os.path.dirname(name),
        search_dirs=search_dirs,
        started=started,
        pinned_dirs=system_include_dirs(),
        defines=cast("list[str]", kwargs.get("define_macro", [])),  # parse_options: a list of str
    )
    if headers is not None and any(headers[k] for k in ("files", "absent", "absent_dirs", "present")):
        return None, "NVRTC cannot write a header trace here, and the source includes or probes a header"
    return headers, why


def _link_lto(ltoir: Any, arch: str, kwargs: dict[str, object]) -> Any:  # cuda.core's ObjectCode (no types)
    from cuda.core import Linker, LinkerOptions

    linker = Linker(ltoir, options=LinkerOptions(arch=arch, link_time_optimization=True))
    try:
        return linker.link("cubin")
    finally:
        linker.close()


def _numbered(source: str) -> str:
    return "\n".join(f"{i:5} | {line}" for i, line in enumerate(source.splitlines(), 1))


# cuda.core puts "6: NVRTC_ERROR_COMPILATION, compilation log:" before the log it repeats.
_LOG_PREFIX = re.compile(r"^\s*\d+: NVRTC_ERROR_\w+, compilation log:\s*")


def _first_error(log_text: str) -> str:
    return next((line.strip() for line in log_text.splitlines() if ": error" in line), "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Log:
    """Collects what NVRTC writes (cuda.core hands logs to a ``write`` method)."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, msg: str) -> None:
        self.parts.append(msg)

    def text(self) -> str:
        return "".join(self.parts)

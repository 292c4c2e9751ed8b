"""The one error hierarchy of lazykern.

Every message says what failed, with which input, and what to do about it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any


class LazykernError(Exception):
    """Base class of every error lazykern raises on purpose."""


class CompileError(LazykernError):
    """NVRTC (or Numba) could not compile a translation unit.

    Carries the kernel or fragment name, the arch, the options, the full
    compiler log and the source it compiled (``.source``), so a failure in a
    worker process can be reported whole. The message holds the log once.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str,
        arch: str | None = None,
        options: Sequence[str] = (),
        log: str = "",
        source: str = "",
    ) -> None:
        self.name = name
        self.arch = arch
        self.options = tuple(options)
        self.log = log
        self.source = source
        context = [f"kernel {name!r}"] if arch is not None or self.options else []
        if arch is not None:
            context.append(f"arch {arch}")
        if self.options:
            context.append(f"options {list(self.options)}")
        detail = message + (f" [{', '.join(context)}]" if context else "")
        if log:
            detail += f"\n--- NVRTC log ---\n{log.rstrip()}"
        if source:
            detail += "\n(the whole translation unit is in this error's .source; LAZYKERN_LOG=DEBUG logs it numbered)"
        super().__init__(detail)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Keyword-only fields would be lost through pickle (worker processes).
        return (_rebuild_compile_error, (self.args[0], self.name, self.arch, self.options, self.log, self.source))


def _rebuild_compile_error(
    detail: str, name: str, arch: str, options: Sequence[str], log: str, source: str = ""
) -> CompileError:
    err = CompileError.__new__(CompileError)
    Exception.__init__(err, detail)
    err.name, err.arch, err.options, err.log, err.source = name, arch, tuple(options), log, source
    return err


class CacheError(LazykernError):
    """The kernel store refused a value or could not be used."""


class StoreBusy(sqlite3.OperationalError, CacheError):
    """Another process held the store database's write lock for longer than the store's wait
    (``LAZYKERN_STORE_TIMEOUT``)."""


class EntryError(CacheError, ValueError):
    """A stored value is not a well-formed lazykern entry."""


class StaleEntry(EntryError):
    """A well-framed entry written by another lazykern version (listed, never served)."""

    def __init__(self, message: str, version: object) -> None:
        super().__init__(message)
        self.version = version


class UntrustedStore(CacheError):
    """A store directory (or its database) that another user controls: refused, never read."""


class BadEntry(CacheError):
    """A stored entry that must not be served (corrupt, foreign or stale: ``stale``); the lookup
    recompiles and replaces it. Raised and caught inside the store."""

    def __init__(self, reason: str, *, stale: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stale = stale

    def __reduce__(self) -> tuple[Any, ...]:
        return (_bad_entry, (self.reason, self.stale))


def _bad_entry(reason: str, stale: bool) -> BadEntry:
    return BadEntry(reason, stale=stale)


class BundleError(CacheError):
    """A bundle could not be written, or was refused as a whole."""


class FamilyError(LazykernError, ValueError):
    """A kernel family could not be found, imported or used as one."""


class CaptureError(LazykernError):
    """An operation is not allowed while a CUDA graph is being captured."""


class LaunchError(LazykernError):
    """A kernel launch was given arguments it cannot take."""


class LaunchConfigError(LaunchError, ValueError):
    """A launch configuration numba-cuda refuses with a ValueError (none given, not 1 to 3 dimensions):
    ``except ValueError`` written around a ``@cuda.jit`` launch catches it here too."""


class LaunchTypeError(LaunchError, TypeError):
    """A launch numba-cuda refuses with a TypeError (a dimension that is not an int, arguments that match
    no signature or not its count): ``except TypeError`` written for ``@cuda.jit`` catches it here too."""


class DriverError(LazykernError):
    """A CUDA driver call failed; the message names the call and the driver's error code."""


class DeviceMemoryError(LazykernError, MemoryError):
    """A computation needs more device memory than the device has free; the message names both."""


class NumberTypeError(LazykernError, TypeError, ValueError):
    """Something other than a number where a number belongs (a bool given as a coupling or a weight): a
    TypeError by its kind, and a ValueError as every other bad number (NaN, inf) is."""


class SlicingError(LazykernError, ValueError):
    """A contraction plan sliced so deep (a tiny ``memory_limit``, or by hand) that its steps would rerun
    millions of times; refused before it runs, with the predicted cost."""


class ReconstructionError(LazykernError, ArithmeticError):
    """The passes of one exact count disagree (their optimal values differ) or never settle."""


class InfeasibleError(LazykernError, ValueError):
    """No configuration of a problem is feasible (its fixed vertices violate a constraint, or its
    constraints exclude every assignment): a ``SingleConfigMax/Min`` has nothing to return."""


class WorkerError(LazykernError, RuntimeError):
    """A worker process died (or could not be started) before it answered: its exit status and last words."""


class RemoteTraceback(Exception):
    """A worker process's traceback, chained under the exception it raised (``raise exc from RemoteTraceback``)."""


class LazykernWarning(UserWarning):
    """Something was degraded or repaired; the program goes on."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first frame outside lazykern: the user's line, not ours.

    A fixed ``stacklevel`` points at the wrong line as soon as lazykern is
    entered through another path (``default_cache()`` vs a ``KernelCache(...)``).
    """
    frame: types.FrameType | None = sys._getframe(0)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def shown(value: Any) -> str:
    """``value`` as a message shows it: its repr, but an int of more than 30 digits by its length (Python
    refuses to write one past 4,300 digits: the message itself would fail), and tuples and lists, Fractions
    and the like element by element."""
    from fractions import Fraction

    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        sign = "a negative" if value < 0 else "an"
        if value.bit_length() < 13000:  # below 3,900 digits: str() counts them
            return f"{sign} int of {len(str(abs(value)))} digits"
        return f"{sign} int of about {int(value.bit_length() * 0.30103) + 1} digits"
    if isinstance(value, Fraction) and max(abs(value.numerator), value.denominator) >= 10**30:
        return f"a Fraction of {shown(value.numerator)} over {shown(value.denominator)}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(shown(x) for x in value)
        return f"({inner}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value)

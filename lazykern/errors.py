"""The one error hierarchy of lazykern.

Every message says what failed, with which input, and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence


class LazykernError(Exception):
    """Base class of every error lazykern raises on purpose."""


class CompileError(LazykernError):
    """NVRTC (or Numba) could not compile a translation unit.

    Carries the kernel or fragment name, the arch, the options and the full
    compiler log, so a failure in a worker process can be reported whole.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str,
        arch: str | None = None,
        options: Sequence[str] = (),
        log: str = "",
    ) -> None:
        self.name = name
        self.arch = arch
        self.options = tuple(options)
        self.log = log
        detail = f"{message} [kernel {name!r}, arch {arch}, options {list(self.options)}]"
        if log:
            detail += f"\n--- NVRTC log ---\n{log.rstrip()}"
        super().__init__(detail)

    def __reduce__(self):
        # Keyword-only fields would be lost through pickle (worker processes).
        return (_rebuild_compile_error, (self.args[0], self.name, self.arch, self.options, self.log))


def _rebuild_compile_error(detail, name, arch, options, log) -> CompileError:
    err = CompileError.__new__(CompileError)
    Exception.__init__(err, detail)
    err.name, err.arch, err.options, err.log = name, arch, tuple(options), log
    return err


class CacheError(LazykernError):
    """The kernel store refused a value or could not be used."""


class EntryError(CacheError, ValueError):
    """A stored value is not a well-formed lazykern entry."""


class BundleError(CacheError):
    """A bundle could not be written, or was refused as a whole."""


class CaptureError(LazykernError):
    """An operation is not allowed while a CUDA graph is being captured."""


class LaunchError(LazykernError):
    """A kernel launch was given arguments it cannot take."""


class DriverError(LazykernError):
    """A CUDA driver call failed; the message names the call and the driver's error code."""


class MagicUsageError(LazykernError, ValueError):
    """The ``%lazykern`` magic's arguments do not parse."""


class LazykernWarning(UserWarning):
    """Something was degraded or repaired; the program goes on."""

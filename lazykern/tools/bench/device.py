"""The device and software a benchmark ran on, read once, recorded with every result."""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import logging
import platform
import re
import sys
from typing import Any

from ...compile.compiler import arch_of
from . import limits

log = logging.getLogger("lazykern")

_DISTRIBUTIONS = ("numpy", "numba", "numba-cuda", "cuda-core", "cuda-bindings", "torch", "matplotlib")


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """What the limits are computed from; ``clock_source`` says whether the clocks were read or assumed."""

    name: str
    cc: tuple[int, int]
    sm_count: int
    clock_hz: float | None
    l2_bytes: int
    mem_bandwidth_bytes_s: float | None
    clock_source: str = "driver"

    @property
    def arch(self) -> str:
        return arch_of(self.cc)

    def issue_limit_tmacs(self, dtype: str) -> float | None:
        return limits.issue_limit_tmacs(dtype, self.cc, self.sm_count, self.clock_hz)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "arch": self.arch}


def device_spec() -> DeviceSpec:
    """Numba's current device, with clocks from the driver (assumed for sm_90 where it reports none)."""
    from numba import cuda

    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    cc = tuple(dev.compute_capability)
    clock_hz = _attr(dev, "CLOCK_RATE", 1e3)
    bandwidth = limits.mem_bandwidth_bytes_s(_attr(dev, "MEMORY_CLOCK_RATE"), _attr(dev, "GLOBAL_MEMORY_BUS_WIDTH"))
    source = "driver"
    if (clock_hz is None or bandwidth is None) and cc == (9, 0):
        clock_hz = clock_hz or limits.ASSUMED_SM90["clock_hz"]
        bandwidth = bandwidth or limits.ASSUMED_SM90["mem_bandwidth_bytes_s"]
        source = "assumed (H100 SXM figures; the driver reported no clock)"
    return DeviceSpec(
        name=name,
        cc=cc,
        sm_count=int(dev.MULTIPROCESSOR_COUNT),
        clock_hz=clock_hz,
        l2_bytes=int(_attr(dev, "L2_CACHE_SIZE") or 50 << 20),
        mem_bandwidth_bytes_s=bandwidth,
        clock_source=source,
    )


def _attr(dev: Any, name: str, scale: float = 1.0) -> float | None:
    try:
        value = getattr(dev, name)
    except Exception as exc:  # attribute missing from this driver: the limit is then unknown
        log.info("device attribute %s unavailable: %s", name, exc)
        return None
    return value * scale if value else None


def environment(argv: list[str] | None = None) -> dict[str, Any]:
    """Versions, driver and command line: enough to tell two result files apart."""
    from lazykern import __version__
    from lazykern.compile import compiler

    env: dict[str, Any] = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join([sys.executable, *(sys.argv if argv is None else argv)]),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "lazykern": __version__,
        "versions": {d: _version(d) for d in _DISTRIBUTIONS},
        "driver": driver_version(),
        "cuda_driver_api": cuda_driver_api_version(),
    }
    try:
        env["nvrtc"] = ".".join(map(str, compiler.nvrtc_version()))
    except Exception as exc:  # no NVRTC: the record says so instead of failing the run
        env["nvrtc"] = f"unavailable ({exc})"
    return env


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def driver_version() -> str | None:
    """The kernel driver's version, e.g. ``580.159``, from /proc (Linux); None elsewhere."""
    try:
        with open("/proc/driver/nvidia/version") as fh:
            text = fh.read()
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([0-9][0-9.]+)", text)
    return m.group(1) if m else text.splitlines()[0].strip() if text else None


def cuda_driver_api_version() -> str | None:
    """The CUDA version the driver supports, e.g. ``13.0``; None without a driver."""
    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        if int(err) != 0:
            return None
        return f"{version // 1000}.{version % 1000 // 10}"
    except Exception:  # no libcuda: CPU-only machine
        return None


def slug(text: str) -> str:
    """A file-name-safe form of a device name.

    >>> slug("NVIDIA H100 80GB HBM3")
    'NVIDIA-H100-80GB-HBM3'
    """
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-") or "device"

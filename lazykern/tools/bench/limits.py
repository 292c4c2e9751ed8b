"""What the hardware could do at best: tropical MAC/s issue limits and memory bandwidth.

A tropical MAC (``acc = max(acc, a + b)``) has no fused instruction for
floats, so its limit is set by how many lanes run the add and the max and by
how many instructions one MAC takes. The rates below are tropical MACs per SM
per clock; multiplied by the SM count and the (boost) clock they give the
figure a kernel is compared with:

* f32: FADD (or FMUL) + FMNMX, two instructions on the FP32 lanes
  (128 per SM on sm_86/89/90, 64 on sm_80): 64 or 32 per SM per clock.
  H100 SXM: 132 SMs x 64 x 1.98 GHz = 16.7 T MAC/s. Independent FADD+FMNMX
  chains reach 15.0 T (89.7%) at the full 1980 MHz (benchmarks/issue_ceiling.py):
  FMNMX runs on the ALU pipe, which takes a warp instruction every other clock.
* i32: sm_90 fuses add and max into one VIADDMNMX on the 64 integer lanes:
  64 per SM per clock; older archs need IADD + IMNMX: 32.
* f64: DADD (or DMUL) + a max on the FP64 lanes (64 per SM on sm_90, 32 on
  sm_80, 2 on sm_86/89): 32, 16 or 1 per SM per clock (H100: about 8.4 T).
  sm_90 has no f64 max instruction: an exact one is DSETP + 2 FSEL, whose
  independent chains reach 5.23 T (62.5%) on an H100 (issue_ceiling.py).
* i64: emulated with several 32-bit instructions; no honest single limit, so
  it is reported without a percentage.

The limit is the same for every semiring (max-plus, min-plus, max-times):
each is one arithmetic and one compare-select instruction per MAC.
"""

from __future__ import annotations

import math

# (compute capability) -> dtype -> tropical MACs per SM per clock. See the module docstring.
MACS_PER_SM_PER_CLOCK: dict[tuple[int, int], dict[str, int]] = {
    (8, 0): {"float32": 32, "int32": 32, "float64": 16},
    (8, 6): {"float32": 64, "int32": 32, "float64": 1},
    (8, 9): {"float32": 64, "int32": 32, "float64": 1},
    (9, 0): {"float32": 64, "int32": 64, "float64": 32},
}

# Used only where the driver does not report clocks: an H100 SXM's boost clock and HBM3 bandwidth.
ASSUMED_SM90 = {"clock_hz": 1.98e9, "mem_bandwidth_bytes_s": 3.35e12}


def macs_per_sm_per_clock(dtype: str, cc: tuple[int, int]) -> int | None:
    """The rate for ``dtype`` on compute capability ``cc``, or None where no limit applies.

    >>> macs_per_sm_per_clock("float32", (9, 0)), macs_per_sm_per_clock("int64", (9, 0))
    (64, None)
    """
    return MACS_PER_SM_PER_CLOCK.get((cc[0], cc[1]), {}).get(_dtype_name(dtype))


def issue_limit_tmacs(dtype: str, cc: tuple[int, int], sm_count: int, clock_hz: float | None) -> float | None:
    """Tropical T MAC/s the device can issue at best for ``dtype``; None where unknown.

    >>> round(issue_limit_tmacs("float32", (9, 0), 132, 1.98e9), 2)
    16.73
    >>> round(issue_limit_tmacs("f64", (9, 0), 132, 1.98e9), 2)
    8.36
    """
    rate = macs_per_sm_per_clock(dtype, cc)
    if rate is None or not clock_hz or not sm_count:
        return None
    return sm_count * rate * clock_hz / 1e12


def mem_bandwidth_bytes_s(mem_clock_khz: float | None, bus_width_bits: float | None) -> float | None:
    """Peak DRAM bandwidth from the driver's memory clock and bus width (double data rate).

    >>> round(mem_bandwidth_bytes_s(2_619_000, 5120) / 1e12, 2)
    3.35
    """
    if not mem_clock_khz or not bus_width_bits:
        return None
    return 2.0 * mem_clock_khz * 1e3 * bus_width_bits / 8


def tmacs(m: int, n: int, k: int, seconds: float, batch: int = 1) -> float:
    """Tropical T MAC/s of an (m x k) by (k x n) product, ``batch`` times, in ``seconds``.

    >>> tmacs(4096, 4096, 4096, 0.01)
    6.8719476736
    """
    if seconds <= 0 or not math.isfinite(seconds):
        raise ValueError(f"seconds must be positive and finite, got {seconds!r}")
    return m * n * k * batch / seconds / 1e12


def gb_per_s(nbytes: int, seconds: float) -> float:
    """Achieved bandwidth in GB/s (1e9 bytes).

    >>> gb_per_s(3_000_000_000, 1.5)
    2.0
    """
    if seconds <= 0 or not math.isfinite(seconds):
        raise ValueError(f"seconds must be positive and finite, got {seconds!r}")
    return nbytes / seconds / 1e9


def percent(value: float | None, limit: float | None) -> float | None:
    """``value`` as a percentage of ``limit``; None where either is missing.

    >>> percent(8.35, 16.7), percent(1.0, None)
    (50.0, None)
    """
    if value is None or not limit:
        return None
    return 100.0 * value / limit


_ALIASES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64"}


def _dtype_name(dtype: str) -> str:
    text = str(dtype)
    return _ALIASES.get(text, text)

"""What instruction issue allows for tropical MAC loops, and at what SM clock the card really runs.

    python -m benchmarks.issue_ceiling --load --out issue_ceiling.json   # on the GPU
    python -m benchmarks.issue_ceiling --sass sm_90                     # no GPU: check the SASS

A tropical MAC is ``acc = max(acc, a + b)``. Each microkernel keeps an outer
product of accumulators per thread (8 x 4; f64: 8 x 2, f64-fmax: 4 x 2) and
runs fully unrolled steps ``acc[i][j] = max(acc[i][j], a[i] + b[j])`` in a loop
over a runtime iteration count, so its hot loop is nothing but the MAC
instructions and a three-instruction loop tail (f64-sel: also 4 register moves
at the back edge); ``--sass`` prints the histograms:

* ``f32``: FADD + FMNMX per MAC (``fmaxf``), 16 steps: a 16 KB loop body.
  ``f32-short``: the same with 2 steps (2 KB), to see instruction fetch.
* ``i32``: one VIADDMNMX per MAC (``max``).
* ``f64-sel``: the library's ``p > acc ? p : acc``: DADD + DSETP + 2 FSEL.
* ``f64-fmax``: ``fmax(acc, p)``: DADD + DSETP.MAX + SEL + FSEL + LOP3 (NaN
  quieting), plus nearly 4 register moves per MAC that ptxas adds around them.

``a`` is loaded once from global memory (one copy per lane, so that it sits in
vector registers as a GEMM's operands do, not in uniform ones); ``b`` is the
previous step's last accumulator row, which costs no instruction. With ``b``
also loaded once, ptxas hoists the loop-invariant sums out of the loop (32 FADD
+ 256 FMNMX for 8 unrolled 8 x 4 steps), which is why the operands must change
from step to step. The last row grows every step, so every register changes
value as in a GEMM. Before timing, every thread's accumulators are checked
against a NumPy reference.

Thread 0 of each block records ``clock64()``, ``%globaltimer`` and ``%smid``
around the loop; the effective SM clock is the median over blocks of
delta-clock / delta-ns. Grids are 1, 2 and 4 blocks per SM of 256 threads
(8, 16, 32 warps per SM; f32 also 128 threads). The table gives T MAC/s, its
percentage of the nominal issue limit (SMs x MACs/SM/clock x the driver's max
clock, see ``lazykern.tools.bench.limits``), the effective clock, MACs per SM per
measured clock and the T MAC/s that rate would give at the max clock.

``--load`` also runs ``tropical.matmul(A, B, "maxplus")`` on 4096 x 4096 f32 for
a few seconds while ``nvidia-smi`` samples clocks, power, temperature and the
clock-event (throttle) reasons every 100 ms.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

SOURCE = r"""
struct MaxF32 {
    typedef float T;
    static __device__ __forceinline__ float mac(float acc, float a, float b) { return fmaxf(acc, a + b); }
};
struct MaxI32 {
    typedef int T;
    static __device__ __forceinline__ int mac(int acc, int a, int b) { return max(acc, a + b); }
};
struct SelF64 {  // the library's tmax<double>
    typedef double T;
    static __device__ __forceinline__ double mac(double acc, double a, double b) {
        double p = a + b;
        return p > acc ? p : acc;
    }
};
struct FmaxF64 {
    typedef double T;
    static __device__ __forceinline__ double mac(double acc, double a, double b) { return fmax(acc, a + b); }
};

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned smid() {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

// src, per lane: a[ROWS], then the accumulators' start values [ROWS][COLS]; per-lane copies keep the
// operands in vector registers as in a GEMM (from one copy, ptxas would put a[] in uniform registers).
// out[(i * COLS + j) * threads + t]. stamps[5 * block]: clock64 and globaltimer at start, at end, the SM's id.
template <class Op, int ROWS, int COLS, int STEPS>
__device__ __forceinline__ void mac_loop(const typename Op::T* __restrict__ src, typename Op::T* __restrict__ out,
                                         unsigned long long* __restrict__ stamps, int iters) {
    typedef typename Op::T T;
    T a[ROWS], acc[ROWS][COLS];
    src += (threadIdx.x % 32) * (ROWS + ROWS * COLS);
#pragma unroll
    for (int i = 0; i < ROWS; ++i) a[i] = src[i];
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int j = 0; j < COLS; ++j) acc[i][j] = src[ROWS + i * COLS + j];
    const unsigned long long clk0 = clock64(), ns0 = globaltimer();
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            T b[COLS];  // the last row: loop-variant operands without an instruction
#pragma unroll
            for (int j = 0; j < COLS; ++j) b[j] = acc[ROWS - 1][j];
#pragma unroll
            for (int i = 0; i < ROWS; ++i)
#pragma unroll
                for (int j = 0; j < COLS; ++j) acc[i][j] = Op::mac(acc[i][j], a[i], b[j]);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long* s = stamps + 5 * blockIdx.x;
        s[0] = clk0;
        s[1] = ns0;
        s[2] = clock64();
        s[3] = globaltimer();
        s[4] = smid();
    }
    const int threads = gridDim.x * blockDim.x, t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int j = 0; j < COLS; ++j) out[(i * COLS + j) * threads + t] = acc[i][j];
}

// 4 blocks of 256 threads per SM: at most 64 registers.
#define MAC_KERNEL(name, Op, ROWS, COLS, STEPS)                                                     \
    extern "C" __global__ void __launch_bounds__(256, 4)                                            \
        name(const Op::T* src, Op::T* out, unsigned long long* stamps, int iters) {                 \
        mac_loop<Op, ROWS, COLS, STEPS>(src, out, stamps, iters);                                   \
    }

MAC_KERNEL(ic_f32, MaxF32, 8, 4, 16)
MAC_KERNEL(ic_f32_short, MaxF32, 8, 4, 2)
MAC_KERNEL(ic_i32, MaxI32, 8, 4, 16)
MAC_KERNEL(ic_f64_sel, SelF64, 8, 2, 16)
MAC_KERNEL(ic_f64_fmax, FmaxF64, 4, 2, 16)  // 8 x 2 spills to local memory
"""

OPTIONS = ("-std=c++17",)  # the tropical library's: no fast-math
SIGNATURE = ("ptr", "ptr", "ptr", "int32")
STAMP_FIELDS = 5
NOMINAL_CLOCK_HZ = 1.98e9  # H100 SXM max clock, where the driver reports none


@dataclasses.dataclass(frozen=True)
class Variant:
    """One microkernel; ``per_mac`` is the SASS it must compile to, None where ptxas decides."""

    name: str
    symbol: str
    dtype: str
    rows: int
    cols: int
    steps: int
    per_mac: dict[str, int] | None
    block_sizes: tuple[int, ...] = (256,)

    @property
    def macs_per_iter(self) -> int:
        return self.rows * self.cols * self.steps


VARIANTS = (
    Variant("f32", "ic_f32", "float32", 8, 4, 16, {"FADD": 1, "FMNMX": 1}, (256, 128)),
    Variant("f32-short", "ic_f32_short", "float32", 8, 4, 2, {"FADD": 1, "FMNMX": 1}),
    Variant("i32", "ic_i32", "int32", 8, 4, 16, {"VIADDMNMX": 1}),
    Variant("f64-sel", "ic_f64_sel", "float64", 8, 2, 16, {"DADD": 1, "DSETP.GT.AND": 1, "FSEL": 2}),
    Variant("f64-fmax", "ic_f64_fmax", "float64", 4, 2, 16, None),
)
BLOCKS_PER_SM = (1, 2, 4)
LOOP_TAIL_MAX = 16  # instructions besides the MACs that a hot loop may have and still count as clean


# ---------------------------------------------------------------- compile --
def compile_cubin(arch: str) -> bytes:
    """Every microkernel in one cubin for ``arch``."""
    from lazykern.compiler import compile_source

    return compile_source(SOURCE, name="issue_ceiling", arch=arch, options=OPTIONS).code


# ------------------------------------------------------------------- SASS --
_INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", re.M)
_BRANCH = re.compile(r"\bBRA\b[^;]*?\b(0x[0-9a-f]+)")
_PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def disassemble(cubin: bytes) -> str:
    """``cuobjdump -sass`` of a cubin; raises FileNotFoundError where cuobjdump is absent."""
    tool = shutil.which("cuobjdump")
    if tool is None:
        raise FileNotFoundError("cuobjdump is not on PATH: install the CUDA toolkit's binary utilities")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        return subprocess.run([tool, "-sass", fh.name], capture_output=True, text=True, check=True).stdout


def sass_functions(sass: str) -> dict[str, list[tuple[int, str]]]:
    """Function name -> its (address, instruction) pairs, predicates kept."""
    parts = re.split(r"^\s+Function : (\S+)", sass, flags=re.M)
    return {
        name: [(int(a, 16), text) for a, text in _INSN.findall(body)] for name, body in zip(parts[1::2], parts[2::2])
    }


def hottest_loop(insns: list[tuple[int, str]]) -> list[str]:
    """The instructions of the largest loop (a backward branch's span), else of the whole function."""
    best: list[str] = []
    for addr, text in insns:
        m = _BRANCH.search(text)
        if m is None or int(m.group(1), 16) > addr:
            continue
        start = int(m.group(1), 16)
        body = [t for a, t in insns if start <= a <= addr]
        if len(body) > len(best):
            best = body
    return best or [t for _, t in insns]


def opcode_histogram(insns: list[str]) -> collections.Counter[str]:
    """Mnemonics with their modifiers (``DSETP.GT.AND``), predicates dropped."""
    return collections.Counter(_PREDICATE.sub("", t).split()[0] for t in insns)


def loop_report(variant: Variant, insns: list[tuple[int, str]]) -> dict[str, Any]:
    """The hot loop's histogram, and whether it is exactly the expected MACs plus a short tail, with no spills."""
    hist = opcode_histogram(hottest_loop(insns))
    macs, total = variant.macs_per_iter, sum(hist.values())
    local = sum(n for op, n in hist.items() if op.startswith(("LDL", "STL")))
    report: dict[str, Any] = {
        "instructions": total,
        "macs": macs,
        "instructions_per_mac": total / macs,
        "local_memory": local,
        "histogram": dict(hist.most_common()),
    }
    if variant.per_mac is not None:
        want = {op: n * macs for op, n in variant.per_mac.items()}
        other = total - sum(hist.get(op, 0) for op in want)
        exact = all(hist.get(op, 0) == n for op, n in want.items())
        report["clean"] = exact and other <= LOOP_TAIL_MAX and not local
    return report


def resource_usage(cubin: bytes) -> dict[str, str]:
    """Function name -> ``"64 registers, 0 B stack"`` from ``cuobjdump -res-usage``."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        text = subprocess.run(["cuobjdump", "-res-usage", fh.name], capture_output=True, text=True, check=True).stdout
    found = re.findall(r"Function (\S+):\s+REG:(\d+) STACK:(\d+)", text)
    return {name: f"{regs} registers, {stack} B stack" for name, regs, stack in found}


def sass_reports(cubin: bytes) -> dict[str, dict[str, Any]]:
    """Variant name -> :func:`loop_report` of its kernel in ``cubin``, with its registers."""
    functions = sass_functions(disassemble(cubin))
    usage = resource_usage(cubin)
    return {v.name: {**loop_report(v, functions[v.symbol]), "resources": usage.get(v.symbol)} for v in VARIANTS}


def describe_loop(variant: Variant, report: dict[str, Any]) -> str:
    """One line such as ``f32: 1027 instructions, 512 MACs: 512 FADD + 512 FMNMX + 3 other (...)``."""
    hist = report["histogram"]
    main_ops = list(variant.per_mac or {}) or [op for op, n in hist.items() if n >= report["macs"]]
    other = {op: n for op, n in hist.items() if op not in main_ops}
    terms = " + ".join(f"{hist.get(op, 0)} {op}" for op in main_ops)
    tail = ", ".join(f"{op} {n}" for op, n in other.items())
    verdict = {True: "as expected", False: "NOT as expected", None: "no fixed form"}[report.get("clean")]
    if report["local_memory"]:
        verdict += ", SPILLS to local memory"
    return (
        f"{variant.name:9s} ({report['resources']}) loop of {report['instructions']} instructions, "
        f"{report['macs']} MACs: {terms} + {sum(other.values())} other ({tail}): {verdict}"
    )


# ------------------------------------------------------------------- data --
def inputs(variant: Variant) -> np.ndarray:
    """``a`` then the accumulators' start values: small integers, exact in every dtype.

    ``a``'s last entry is the largest and positive, so the last row (the next
    step's ``b``) grows every step and every other row follows it.
    """
    a = np.arange(variant.rows) - variant.rows // 2
    rng = np.random.default_rng(0)
    acc = rng.integers(-20, 21, size=variant.rows * variant.cols)
    return np.concatenate([a, acc]).astype(variant.dtype)


def reference(variant: Variant, src: np.ndarray, iters: int) -> np.ndarray:
    """What every thread's accumulators hold after ``iters`` iterations, in NumPy."""
    a = src[: variant.rows, None]
    acc = src[variant.rows :].reshape(variant.rows, variant.cols).copy()
    for _ in range(iters * variant.steps):
        acc = np.maximum(acc, a + acc[-1][None, :])
    return acc.ravel()


def max_iters(variant: Variant) -> int:
    """Iterations before the growing last row could overflow int32 (or lose f32 exactness: harmless)."""
    growth = int(variant.rows - 1 - variant.rows // 2) * variant.steps
    return (2**30) // max(1, growth)


# ----------------------------------------------------------------- timing --
@dataclasses.dataclass
class Launch:
    """One variant at one grid, with its device buffers."""

    variant: Variant
    kernel: Any
    threads: int
    blocks: int
    src: Any
    out: Any
    stamps: Any
    stream: Any

    def __call__(self, iters: int) -> None:
        grid, block = (self.blocks,), (self.threads,)
        self.kernel[grid, block, self.stream](self.src, self.out, self.stamps, np.int32(iters))

    def timed(self, cuda: Any, iters: int) -> tuple[float, np.ndarray]:
        """Seconds (CUDA events) of one launch, and its stamps."""
        start, end = cuda.event(), cuda.event()
        start.record(self.stream)
        self(iters)
        end.record(self.stream)
        end.synchronize()
        stamps = self.stamps.copy_to_host(stream=self.stream)
        self.stream.synchronize()
        return cuda.event_elapsed_time(start, end) / 1e3, stamps.reshape(-1, STAMP_FIELDS)


def make_launch(cuda: Any, kernel: Any, variant: Variant, threads: int, blocks: int, stream: Any) -> Launch:
    src = cuda.to_device(np.tile(inputs(variant), 32), stream=stream)  # one copy per lane
    out = cuda.device_array(variant.rows * variant.cols * threads * blocks, dtype=variant.dtype, stream=stream)
    stamps = cuda.device_array(STAMP_FIELDS * blocks, dtype=np.uint64, stream=stream)
    return Launch(variant, kernel, threads, blocks, src, out, stamps, stream)


def check_result(launch: Launch, iters: int) -> None:
    """Every thread's accumulators must match the NumPy reference: the kernel does what it says."""
    launch(iters)
    got = launch.out.copy_to_host(stream=launch.stream)
    launch.stream.synchronize()
    got = got.reshape(launch.variant.rows * launch.variant.cols, -1)
    want = reference(launch.variant, inputs(launch.variant), iters)
    if not (got == want[:, None]).all():
        raise AssertionError(f"{launch.variant.name}: accumulators differ from the NumPy reference after {iters} iters")


def effective_mhz(stamps: np.ndarray) -> float:
    """Median over blocks of delta-clock64 / delta-globaltimer (ns), in MHz."""
    clocks = stamps[:, 2].astype(np.float64) - stamps[:, 0]
    ns = stamps[:, 3].astype(np.float64) - stamps[:, 1]
    return float(np.median(clocks[ns > 0] / ns[ns > 0] * 1e3))


def calibrate_iters(cuda: Any, launch: Launch, target_s: float) -> int:
    """Iterations that make one launch last about ``target_s``.

    Probes grow 8x until one lasts a tenth of the target, so that launch
    overhead does not skew the estimate.
    """
    limit = max_iters(launch.variant)
    probe = 64
    while True:
        seconds, _ = launch.timed(cuda, probe)
        if seconds >= target_s / 10 or probe >= limit:
            break
        probe = min(probe * 8, limit)
    return max(1, min(int(probe * target_s / max(seconds, 1e-6)), limit))


def measure(cuda: Any, launch: Launch, target_s: float, repeats: int, warmup: int = 2) -> dict[str, Any]:
    """Median T MAC/s and effective clock over ``repeats`` launches of about ``target_s`` each."""
    iters = calibrate_iters(cuda, launch, target_s)
    for _ in range(warmup):
        launch(iters)
    seconds, mhz, per_sm = [], [], 0
    for _ in range(repeats):
        s, stamps = launch.timed(cuda, iters)
        seconds.append(s)
        mhz.append(effective_mhz(stamps))
        per_sm = max(per_sm, int(np.bincount(stamps[:, 4].astype(np.int64)).max()))
    macs = launch.variant.macs_per_iter * iters * launch.threads * launch.blocks
    median_s = statistics.median(seconds)
    return {
        "iters": iters,
        "macs": macs,
        "median_s": median_s,
        "min_s": min(seconds),
        "tmacs": macs / median_s / 1e12,
        "mhz": statistics.median(mhz),
        "mhz_min": min(mhz),
        "mhz_max": max(mhz),
        "max_blocks_on_one_sm": per_sm,
    }


@dataclasses.dataclass(frozen=True)
class Device:
    """What the figures are normalised by."""

    name: str
    cc: tuple[int, int]
    sm_count: int
    max_clock_hz: float
    clock_source: str
    uuid: str | None


def current_device() -> Device:
    """Numba's current device; the max clock from the driver (or the H100 constant where it reports none)."""
    from numba import cuda

    from lazykern.tools.bench.device import device_spec

    spec = device_spec()
    clock, source = spec.clock_hz, spec.clock_source
    if not clock:
        clock, source = NOMINAL_CLOCK_HZ, "assumed (H100 SXM max clock)"
    uuid = getattr(cuda.get_current_device(), "uuid", None)
    return Device(spec.name, spec.cc, spec.sm_count, clock, source, uuid)


def figures(result: dict[str, Any], variant: Variant, device: Device) -> dict[str, Any]:
    """Percent of the nominal limit, MACs per SM per measured clock and the T MAC/s that gives at max clock."""
    from lazykern.tools.bench import limits

    rate = limits.macs_per_sm_per_clock(variant.dtype, device.cc)
    nominal = limits.issue_limit_tmacs(variant.dtype, device.cc, device.sm_count, device.max_clock_hz)
    per_clock = result["tmacs"] * 1e12 / (device.sm_count * result["mhz"] * 1e6)
    return {
        "nominal_tmacs": nominal,
        "pct_nominal": limits.percent(result["tmacs"], nominal),
        "macs_per_sm_clock": per_clock,
        "pct_issue_rate": limits.percent(per_clock, rate),
        "tmacs_at_max_clock": per_clock * device.sm_count * device.max_clock_hz / 1e12,
    }


def microbenchmarks(cuda: Any, cubin: bytes, arch: str, device: Device, args: argparse.Namespace) -> list[dict]:
    """Every variant at 1, 2 and 4 blocks per SM (and each of its block sizes), after a warm-up."""
    from lazykern.kernel import Kernel

    stream = cuda.stream()
    rows = []
    for variant in VARIANTS:
        kernel = Kernel(variant.name, variant.symbol, cubin, arch=arch, signature=SIGNATURE)
        for threads in variant.block_sizes:
            for per_sm in BLOCKS_PER_SM:
                launch = make_launch(cuda, kernel, variant, threads, per_sm * device.sm_count, stream)
                if not rows:
                    warm_up(cuda, launch, args.warmup_s)
                check_result(launch, iters=3)
                result = measure(cuda, launch, args.ms / 1e3, args.repeats)
                row = {"variant": variant.name, "threads": threads, "blocks_per_sm": per_sm,
                       "warps_per_sm": per_sm * threads // 32, **result}  # fmt: skip
                row.update(figures(row, variant, device))
                rows.append(row)
                print(f"  {variant.name} {threads}x{per_sm}: {row['tmacs']:.2f} T MAC/s", file=sys.stderr, flush=True)
    return rows


def warm_up(cuda: Any, launch: Launch, seconds: float) -> None:
    """Run for ``seconds`` first, so that clocks and power have settled before anything is timed."""
    iters = calibrate_iters(cuda, launch, 0.05)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        launch(iters)
        launch.stream.synchronize()


def table(rows: list[dict[str, Any]], device: Device) -> str:
    clock = f"{device.max_clock_hz / 1e6:.0f} MHz ({device.clock_source})"
    lines = [
        f"{device.name}: {device.sm_count} SMs, max clock {clock}",
        f"{'variant':10s} {'block':>5s} {'warps/SM':>8s} {'T MAC/s':>8s} {'% nominal':>9s} {'eff MHz':>8s} "
        f"{'MAC/SM/clk':>10s} {'% rate':>6s} {'T @max clk':>10s} {'blocks/SM':>9s}",
    ]
    for r in rows:
        pct = "-" if r["pct_nominal"] is None else f"{r['pct_nominal']:.1f}"
        rate = "-" if r["pct_issue_rate"] is None else f"{r['pct_issue_rate']:.1f}"
        lines.append(
            f"{r['variant']:10s} {r['threads']:5d} {r['warps_per_sm']:8d} {r['tmacs']:8.2f} {pct:>9s} "
            f"{r['mhz']:8.0f} {r['macs_per_sm_clock']:10.2f} {rate:>6s} {r['tmacs_at_max_clock']:10.2f} "
            f"{r['blocks_per_sm']:>5d} ({r['max_blocks_on_one_sm']} max)"
        )
    lines.append("% rate: MACs per SM per measured clock against the nominal rate (64 f32/i32, 32 f64 on sm_90).")
    lines.append("blocks/SM: as launched (the most any SM ran, from %smid).")
    return "\n".join(lines)


# -------------------------------------------------------------- load mode --
SMI_FIELDS = ("timestamp", "clocks.sm", "clocks.max.sm", "power.draw", "power.limit", "temperature.gpu")
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
# NVML's clocks event (throttle) reason bits.
REASON_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
LOAD_SIZE = 4096


def smi_query(uuid: str | None) -> tuple[list[str] | None, str]:
    """The nvidia-smi command line to sample with (None if it cannot), and why."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None, "nvidia-smi not found on PATH"
    select = ["-i", uuid] if uuid else []
    answers = []
    for reason in REASON_FIELDS:  # drivers before 535 know only the older name, clocks_throttle_reasons
        query = [tool, *select, f"--query-gpu={','.join((*SMI_FIELDS, reason))}", "--format=csv,noheader,nounits"]
        try:
            probe = subprocess.run(query, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"nvidia-smi failed to run: {exc}"
        if probe.returncode == 0 and parse_sample((probe.stdout.strip().splitlines() or [""])[0]) is not None:
            return query, f"sampled {reason}"
        answers.append(f"{reason}: {(probe.stdout.strip() or probe.stderr.strip())[:200]}")
    return None, "nvidia-smi refused the query: " + "; ".join(answers)


def parse_number(text: str) -> float | None:
    """``"1980"`` -> 1980.0; ``"[N/A]"``, ``"[Not Supported]"`` -> None."""
    try:
        return float(text)
    except ValueError:
        return None


def parse_sample(line: str) -> dict[str, Any] | None:
    """One CSV line of :data:`SMI_FIELDS` plus the reasons bitmask; None for a line that is not one."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != len(SMI_FIELDS) + 1:
        return None
    try:
        when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
    except ValueError:
        return None
    sample: dict[str, Any] = {"time": when}
    sample.update({f: parse_number(v) for f, v in zip(SMI_FIELDS[1:], parts[1:])})
    sample["reasons"] = int(parts[-1], 16) if parts[-1].lower().startswith("0x") else None
    return sample


class SmiSampler:
    """``nvidia-smi -lms 100`` in a subprocess, its lines collected by a thread."""

    def __init__(self, query: list[str], period_ms: int = 100) -> None:
        self.proc = subprocess.Popen([*query, "-lms", str(period_ms)], stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line)

    def stop(self) -> list[str]:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.reader.join(timeout=5)
        return self.lines


def summarize_samples(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the numeric fields, every reasons bitmask seen, OR-ed, and named."""

    def median_of(field: str) -> float | None:
        values = [s[field] for s in samples if s[field] is not None]
        return statistics.median(values) if values else None

    masks = sorted({s["reasons"] for s in samples if s["reasons"] is not None})
    seen = 0
    for m in masks:
        seen |= m
    return {
        "samples": len(samples),
        "clocks_sm_mhz": median_of("clocks.sm"),
        "clocks_sm_mhz_min": min((s["clocks.sm"] for s in samples if s["clocks.sm"] is not None), default=None),
        "clocks_max_sm_mhz": median_of("clocks.max.sm"),
        "power_w": median_of("power.draw"),
        "power_limit_w": median_of("power.limit"),
        "temperature_c": median_of("temperature.gpu"),
        "reasons_masks": [hex(m) for m in masks],
        "reasons_or": hex(seen),
        "reasons": [name for bit, name in REASON_BITS.items() if seen & bit],
    }


def gemm_operands(cuda: Any, stream: Any) -> tuple[Any, Any, Any]:
    """A, B and C of a 4096^3 f32 max-plus product, after one product (which compiles or loads the kernel)."""
    from lazykern import tropical

    rng = np.random.default_rng(0)
    A = cuda.to_device(rng.standard_normal((LOAD_SIZE, LOAD_SIZE), dtype=np.float32), stream=stream)
    B = cuda.to_device(rng.standard_normal((LOAD_SIZE, LOAD_SIZE), dtype=np.float32), stream=stream)
    C = tropical.matmul(A, B, "maxplus", stream=stream)
    stream.synchronize()
    return A, B, C


def run_gemms(A: Any, B: Any, C: Any, stream: Any, seconds: float) -> tuple[int, float]:
    """Back-to-back products for ``seconds``: (products done, wall seconds)."""
    from lazykern import tropical

    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(4):  # a few in flight, never a queue that outlives the window
            tropical.matmul(A, B, "maxplus", out=C, stream=stream)
        count += 4
        stream.synchronize()
    return count, time.perf_counter() - start


def load_run(cuda: Any, device: Device, seconds: float) -> dict[str, Any]:
    """The library's GEMM under load, with nvidia-smi's view of clocks, power and throttling."""
    stream = cuda.stream()
    A, B, C = gemm_operands(cuda, stream)
    query, how = smi_query(device.uuid)
    sampler = SmiSampler(query) if query else None
    time.sleep(0.3)  # let the first sample land before the load starts
    started = datetime.datetime.now()
    count, wall = run_gemms(A, B, C, stream, seconds)
    finished = datetime.datetime.now()
    lines = sampler.stop() if sampler else []
    result: dict[str, Any] = {
        "seconds": wall,
        "products": count,
        "tmacs": count * LOAD_SIZE**3 / wall / 1e12,
        "nvidia_smi": how,
    }
    if query:
        samples = [s for s in map(parse_sample, lines) if s is not None]
        # The first half second ramps up; the samples inside the load window are the ones that count.
        window = [s for s in samples if started + datetime.timedelta(seconds=0.5) <= s["time"] <= finished]
        result.update(summarize_samples(window or samples))
        result["samples_from_load_window"] = bool(window)  # else all samples: clocks disagreed
        result["query"] = " ".join(query)
    return result


def describe_load(load: dict[str, Any]) -> str:
    head = f"tropical.matmul 4096^3 f32 maxplus: {load['tmacs']:.2f} T MAC/s over {load['seconds']:.1f} s"
    if "samples" not in load:
        return f"{head}; no clock samples: {load['nvidia_smi']}"
    return (
        f"{head}\n  nvidia-smi ({load['samples']} samples): SM clock {load['clocks_sm_mhz']} MHz "
        f"(min {load['clocks_sm_mhz_min']}, max {load['clocks_max_sm_mhz']}), power {load['power_w']} W "
        f"of {load['power_limit_w']} W, {load['temperature_c']} C, reasons {load['reasons_or']} {load['reasons']}"
    )


# ------------------------------------------------------------------- main --
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sass", metavar="ARCH", help="compile for ARCH (e.g. sm_90), print the hot loops' SASS, stop")
    parser.add_argument("--load", action="store_true", help="also time tropical.matmul under nvidia-smi sampling")
    parser.add_argument("--load-seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=10, help="timed launches per case (median)")
    parser.add_argument("--ms", type=float, default=50.0, help="target milliseconds per timed launch")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="seconds of load before the first timing")
    parser.add_argument("--out", help="write everything as JSON here")
    return parser.parse_args(argv)


def print_sass(arch: str) -> dict[str, dict[str, Any]]:
    reports = sass_reports(compile_cubin(arch))
    print(f"hot loops for {arch} (cuobjdump -sass):")
    for v in VARIANTS:
        print("  " + describe_loop(v, reports[v.name]))
    return reports


def gpu_run(args: argparse.Namespace) -> dict[str, Any]:
    from numba import cuda

    from lazykern.compiler import current_arch
    from lazykern.tools.bench.device import environment

    device = current_device()
    arch = current_arch()
    cubin = compile_cubin(arch)
    results: dict[str, Any] = {"environment": environment(), "device": dataclasses.asdict(device), "arch": arch}
    if shutil.which("cuobjdump"):
        results["sass"] = print_sass(arch)
    results["variants"] = microbenchmarks(cuda, cubin, arch, device, args)
    print(table(results["variants"], device))
    if args.load:
        results["load"] = load_run(cuda, device, args.load_seconds)
        print(describe_load(results["load"]))
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sass:
        from lazykern.tools.bench.device import environment

        results: dict[str, Any] = {"environment": environment(), "arch": args.sass, "sass": print_sass(args.sass)}
    else:
        results = gpu_run(args)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Tropical GEMM throughput against the hardware's issue limit, with torch side by side.

Every case is timed on the GPU (CUDA events, warm-up, median of samples,
rotating buffers; see :mod:`lazykern.tools.bench._timing`) and then spot-checked
against ``tropical.reference`` on sampled rows x columns: a wrong result is
reported as WRONG and gets no throughput figure.

Shapes are written ``m x k x n``: A is m x k, B is k x n.

    python -m benchmarks.gemm [--quick] [--out DIR]
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _check, _report, _timing, device, limits

if TYPE_CHECKING:
    from rich.table import Table

log = logging.getLogger("lazykern")

SEMIRINGS = ("maxplus", "minplus", "maxmul")
DTYPES = ("float32", "float64", "int32", "int64")
DEFAULT_OUT = os.path.join("benchmarks", "results")
TORCH_CHUNK_BYTES = 1 << 30  # the broadcast temporary torch may hold at once

# Figures from DESIGN.md, measured on an H100 before this suite existed; kept as reference only.
REFERENCE_FIGURES: dict[str, Any] = {
    "note": "reference figures measured earlier, not in this run "
    "(H100 SXM, driver 580.159, numba-cuda 0.30.4, NVRTC 13.0; see DESIGN.md)",
    "tropical-gemm (Rust crate), f32 maxplus, T MAC/s": {
        "4096x4096x4096": 10.2,
        "8192x8192x8192": 10.5,
        "2097152x4x4": 0.074,
    },
    "tropical-gemm start-up, seconds": {
        "NVRTC of its whole .cu file (every context creation)": 17.2,
        "driver JIT of its PTX for 31 kernels (every process)": 7.3,
    },
    "simple 128x128x8 register-blocked kernel, f32 maxplus 8192^3, T MAC/s": 9.4,
    "torch broadcast + amax in chunks, f32 maxplus 8192^3, T MAC/s": 0.26,
    "issue limit f32 maxplus (H100 SXM), T MAC/s": 16.7,
}


@dataclasses.dataclass(frozen=True)
class Case:
    """One measured product. ``torch`` also runs the torch baseline on it."""

    group: str
    semiring: str
    dtype: str
    m: int
    k: int
    n: int
    batch: int = 1
    op: str = "matmul"  # "matmul", "bmm" or "backward"
    argmax: bool = False
    torch: bool = False

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k * self.batch

    @property
    def shape(self) -> str:
        return _report.format_shape(self.m, self.k, self.n, self.batch)

    @property
    def label(self) -> str:
        extra = "+argmax" if self.argmax else ""
        return f"{self.op}{extra} {self.semiring} {self.dtype} {self.shape}"


def cases(quick: bool = False) -> list[Case]:
    """The shape matrix: full, or quick (f32 max-plus on a few shapes plus one of each other kind)."""
    big = 4096
    if quick:
        out = [Case("square", "maxplus", "float32", s, s, s, torch=True) for s in (256, 1024, big)]
        out.append(Case("skinny", "maxplus", "float32", 1 << 21, 4, 4, torch=True))
        out += [Case("semiring", s, "float32", big, big, big) for s in SEMIRINGS if s != "maxplus"]
        out += [Case("dtype", "maxplus", d, big, big, big) for d in DTYPES if d != "float32"]
        out.append(Case("argmax", "maxplus", "float32", big, big, big, argmax=True))
        out.append(Case("batched", "maxplus", "float32", 64, 64, 64, batch=1024, op="bmm"))
        out.append(Case("backward", "maxplus", "float32", big, big, big, op="backward"))
        return out
    out = [Case("square", "maxplus", "float32", s, s, s, torch=True) for s in (256, 1024, big, 8192)]
    out += [
        Case("skinny", "maxplus", "float32", 1 << 21, 4, 4, torch=True),
        Case("skinny", "maxplus", "float32", big, 64, big, torch=True),
        Case("skinny", "maxplus", "float32", 64, big, 64, torch=True),
        Case("batched", "maxplus", "float32", 64, 64, 64, batch=1024, op="bmm"),
    ]
    out += [
        Case("semiring x dtype", s, d, big, big, big)
        for s in SEMIRINGS
        for d in DTYPES
        if (s, d) != ("maxplus", "float32")
    ]
    out += [Case("argmax", s, d, big, big, big, argmax=True) for s in SEMIRINGS for d in DTYPES]
    out.append(Case("backward", "maxplus", "float32", big, big, big, op="backward"))
    return out


@dataclasses.dataclass
class _Context:
    spec: device.DeviceSpec
    stream: Any
    clock: _timing.Clock
    rng: np.random.Generator
    timing: dict[str, Any]  # keyword arguments of _timing.measure


def run(
    quick: bool = False,
    out: str | os.PathLike[str] | None = None,
    *,
    torch: bool = True,
    seed: int = 0,
    selected: Sequence[Case] | None = None,
    progress: Callable[[str], None] | None = None,
    argv: list[str] | None = None,
    tropical: Any = None,
    clock: _timing.Clock | None = None,
    spec: device.DeviceSpec | None = None,
) -> dict[str, Any]:
    """Measure every case; write JSON and PNG into ``out`` (nothing written when None); return the result.

    ``tropical``, ``clock`` and ``spec`` replace the library, the CUDA-event
    clock and the device's figures (tests run the suite on the simulator with them).
    """
    from numba import cuda

    from lazykern import LazykernError

    if tropical is None:
        from lazykern import tropical
    if not cuda.is_available():
        raise LazykernError(
            "the GEMM benchmark needs a CUDA GPU and none was found; "
            "the start-up suite runs without one: lazykern bench startup --quick"
        )
    spec = spec or device.device_spec()
    stream = cuda.stream()
    ctx = _Context(
        spec=spec,
        stream=stream,
        clock=clock or _timing.CudaEventClock(stream, spec.clock_hz),
        rng=np.random.default_rng(seed),
        timing=dict(min_samples=5, min_seconds=0.05) if quick else dict(min_samples=10, min_seconds=0.2),
    )
    has_torch = torch and _torch_available()
    todo = list(selected) if selected is not None else cases(quick)
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    for index, case in enumerate(todo, 1):
        if progress:
            progress(f"[{index}/{len(todo)}] lazykern {case.label}")
        results.append(_guarded(_measure_lazykern, case, ctx, tropical, "lazykern"))
        if case.torch and has_torch and case.op == "matmul" and not case.argmax:
            if progress:
                progress(f"[{index}/{len(todo)}] torch {case.label}")
            results.append(_guarded(_measure_torch, case, ctx, tropical, "torch"))
    family = tropical.family
    result: dict[str, Any] = {
        "suite": "gemm",
        "mode": "quick" if quick else "full",
        "shape_convention": "m x k x n: A is m x k, B is k x n; batch x ... for batched products",
        "device": spec.as_dict(),
        "environment": device.environment(argv),
        "limits": {d: spec.issue_limit_tmacs(d) for d in DTYPES},
        "mem_bandwidth_gb_s": None if spec.mem_bandwidth_bytes_s is None else spec.mem_bandwidth_bytes_s / 1e9,
        "limits_assumption": limits.__doc__.strip(),
        "torch": "measured" if has_torch else "not installed or disabled",
        "cases": results,
        "laziness": {
            "compiled": family.compiled(),
            "compiled_count": len(family.compiled()),
            "fragments": len(family.names()),
            "compile_calls": family.compile_calls,
        },
        "reference_figures": REFERENCE_FIGURES,
        "wall_seconds": time.perf_counter() - started,
    }
    result = _report.clean(result)
    if out is not None:
        _report.save(result, out, "gemm", spec.name, _report.write_gemm_png)
    return result


def table(result: dict[str, Any]) -> Table:
    """The rich table of a result (for the CLI)."""
    return _report.gemm_table(result)


def _guarded(
    measure: Callable[..., dict[str, Any]], case: Case, ctx: _Context, tropical: Any, impl: str
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "impl": impl,
        "group": case.group,
        "op": case.op,
        "semiring": case.semiring,
        "dtype": case.dtype,
        "argmax": case.argmax,
        "batch": case.batch,
        "m": case.m,
        "k": case.k,
        "n": case.n,
        "shape": case.shape,
        "macs": case.macs,
        "error": None,
    }
    try:
        record.update(measure(case, ctx, tropical))
    except Exception as exc:  # one failing case must not hide the others; the record says why
        log.exception("benchmark case %s (%s) failed", case.label, impl)
        record["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return record


def _figures(
    case: Case, ctx: _Context, meas: _timing.Measurement, check: _check.Check, nbytes: int | None
) -> dict[str, Any]:
    seconds = meas.median
    fig: dict[str, Any] = {"ms": seconds * 1e3, "timing": meas.as_dict(), "check": check.as_dict()}
    if case.op == "backward":
        limit = ctx.spec.mem_bandwidth_bytes_s
        gbs = limits.gb_per_s(nbytes, seconds) if check.ok and nbytes is not None else None
        fig.update(
            bytes=nbytes,
            gb_s=gbs,
            bw_limit_gb_s=None if limit is None else limit / 1e9,
            pct_limit=limits.percent(gbs, None if limit is None else limit / 1e9),
            tmacs=None,
        )
        return fig
    t = limits.tmacs(case.m, case.n, case.k, seconds, case.batch) if check.ok else None
    limit = ctx.spec.issue_limit_tmacs(case.dtype)
    fig.update(tmacs=t, limit_tmacs=limit, pct_limit=limits.percent(t, limit))
    return fig


def _random(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape, dtype=dt)
    return rng.integers(-1000, 1001, size=shape, dtype=dt)  # small: max-times never saturates


def _operands(case: Case, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    lead = (case.batch,) if case.op == "bmm" else ()
    return _random((*lead, case.m, case.k), case.dtype, rng), _random((*lead, case.k, case.n), case.dtype, rng)


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes keyword ``name`` (directly or through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _measure_lazykern(case: Case, ctx: _Context, tropical: Any) -> dict[str, Any]:
    from numba import cuda

    if case.op == "backward":
        return _measure_backward(case, ctx, tropical)
    A, B = _operands(case, ctx.rng)
    out_shape = (*A.shape[:-1], B.shape[-1])
    per_call = A.nbytes + B.nbytes + int(np.prod(out_shape)) * A.itemsize
    nbuf = _timing.buffers_for(per_call, ctx.spec.l2_bytes)
    s = ctx.stream
    dA = [cuda.to_device(A, stream=s) for _ in range(nbuf)]
    dB = [cuda.to_device(B, stream=s) for _ in range(nbuf)]
    op = tropical.bmm if case.op == "bmm" else tropical.matmul
    kw: dict[str, Any] = {"semiring": case.semiring}
    if _accepts(op, "stream"):
        kw["stream"] = s
    if case.argmax:
        kw["argmax"] = True
    outs = None
    if case.op == "matmul" and not case.argmax and _accepts(op, "out"):
        outs = [cuda.device_array(out_shape, dtype=A.dtype, stream=s) for _ in range(nbuf)]
    last: list[Any] = [None]

    def call(i: int) -> None:
        j = i % nbuf
        if outs is not None:
            last[0] = op(dA[j], dB[j], out=outs[j], **kw)
        else:
            last[0] = op(dA[j], dB[j], **kw)

    with cuda.defer_cleanup():
        meas = _timing.measure(call, ctx.clock, **ctx.timing)
    s.synchronize()
    got = last[0]
    C, K = got if case.argmax else (got, None)
    check = _check.check_matmul(
        tropical.reference.matmul,
        A,
        B,
        _host(C),
        None if K is None else _host(K),
        semiring=case.semiring,
        rng=ctx.rng,
    )
    return {**_figures(case, ctx, meas, check, None), "buffers": nbuf}


def _measure_backward(case: Case, ctx: _Context, tropical: Any) -> dict[str, Any]:
    from numba import cuda

    s = ctx.stream
    A, B = _operands(case, ctx.rng)
    fwd_kw: dict[str, Any] = {"semiring": case.semiring, "argmax": True}
    if _accepts(tropical.matmul, "stream"):
        fwd_kw["stream"] = s
    _, K = tropical.matmul(cuda.to_device(A, stream=s), cuda.to_device(B, stream=s), **fwd_kw)
    grad_c = _random((case.m, case.n), case.dtype, ctx.rng)
    d_grad = cuda.to_device(grad_c, stream=s)
    bwd_kw: dict[str, Any] = {"stream": s} if _accepts(tropical.matmul_backward, "stream") else {}
    if _accepts(tropical.matmul_backward, "out"):  # gradients allocated once: time the kernels, not cuMemAlloc
        bwd_kw["out"] = tropical.matmul_backward(d_grad, K, A.shape, B.shape, **bwd_kw)
    last: list[Any] = [None]

    def call(i: int) -> None:
        last[0] = tropical.matmul_backward(d_grad, K, A.shape, B.shape, **bwd_kw)

    with cuda.defer_cleanup():
        meas = _timing.measure(call, ctx.clock, **ctx.timing)
    s.synchronize()
    grad_a, grad_b = last[0]
    # The least a backward pass must move: read grad_C and the argmax, write both gradients.
    nbytes = grad_c.nbytes + int(K.nbytes) + int(grad_a.nbytes) + int(grad_b.nbytes)
    check = _check.check_backward(grad_c, _host(K), _host(grad_a), _host(grad_b), rng=ctx.rng)
    return {**_figures(case, ctx, meas, check, nbytes), "buffers": 1}


def _host(array: Any) -> np.ndarray:
    """A device array (Numba, CuPy, torch) or a host array as NumPy."""
    if isinstance(array, np.ndarray):
        return array
    host: np.ndarray
    if hasattr(array, "copy_to_host"):
        host = array.copy_to_host()
    elif hasattr(array, "get"):
        host = array.get()
    elif hasattr(array, "cpu"):
        host = array.cpu().numpy()
    else:
        host = np.asarray(array)
    return host


def _torch_available() -> bool:
    try:
        import torch

        available: bool = torch.cuda.is_available()
        return available
    except ImportError:
        return False


def torch_tropical(A: Any, B: Any, out: Any, semiring: str, chunk_bytes: int = TORCH_CHUNK_BYTES) -> Any:
    """The torch baseline: ``(A[:, :, None] op B[None]).amax(1)``, chunked over k (and m) to bound memory."""
    import torch

    m, k = A.shape
    n = B.shape[1]
    row_bytes = n * A.element_size()
    rows = max(1, min(m, chunk_bytes // max(1, row_bytes)))
    depth = max(1, min(k, chunk_bytes // max(1, rows * row_bytes)))
    combine = torch.mul if semiring == "maxmul" else torch.add
    reduce_ = torch.amin if semiring == "minplus" else torch.amax
    better = torch.minimum if semiring == "minplus" else torch.maximum
    for r0 in range(0, m, rows):
        acc = None
        for k0 in range(0, k, depth):
            part = reduce_(combine(A[r0 : r0 + rows, k0 : k0 + depth, None], B[None, k0 : k0 + depth, :]), dim=1)
            acc = part if acc is None else better(acc, part, out=acc)
        out[r0 : r0 + rows] = acc
    return out


def _measure_torch(case: Case, ctx: _Context, tropical: Any) -> dict[str, Any]:
    import torch

    A, B = _operands(case, ctx.rng)
    per_call = A.nbytes + B.nbytes + case.m * case.n * A.itemsize
    nbuf = _timing.buffers_for(per_call, ctx.spec.l2_bytes)
    external = torch.cuda.ExternalStream(int(ctx.stream.handle))
    timing = dict(ctx.timing)
    if case.macs >= 1 << 36:  # seconds per call: one warm-up is enough
        timing.update(warmup=1, min_samples=3)
    with torch.cuda.stream(external):
        tA = [torch.from_numpy(A).to("cuda") for _ in range(nbuf)]
        tB = [torch.from_numpy(B).to("cuda") for _ in range(nbuf)]
        outs = [torch.empty((case.m, case.n), dtype=tA[0].dtype, device="cuda") for _ in range(nbuf)]
        meas = _timing.measure(
            lambda i: torch_tropical(tA[i % nbuf], tB[i % nbuf], outs[i % nbuf], case.semiring), ctx.clock, **timing
        )
        external.synchronize()
        C = outs[0].cpu().numpy()
    check = _check.check_matmul(tropical.reference.matmul, A, B, C, semiring=case.semiring, rng=ctx.rng)
    return {**_figures(case, ctx, meas, check, None), "buffers": nbuf}

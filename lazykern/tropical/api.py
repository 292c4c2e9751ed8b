"""matmul / bmm / matmul_backward: validate, pick a kernel per shape class, launch.

A call with Numba, CuPy or PyTorch device arrays is first run by :mod:`._hot`
(a key of everything the launch depends on, one lookup in the one call table); a
hit allocates its outputs stream-ordered and launches. A miss takes the general
path here: describe the operands (no copies), validate, plan, then build the
call, remember it in that table and run it. Nothing synchronizes the device.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from .._numba import internals
from ..launch import _batch_split, _device
from . import _arrays, _hot, reference
from . import plan as planner
from ._arrays import Operand
from ._family import family
from .fragments import BACKWARD_THREADS, NUMPY_DTYPES, REDUCE_THREADS, Spec

if TYPE_CHECKING:
    from ..launch.kernel import Kernel

log = logging.getLogger("lazykern")

DTYPE_CODE = {np.dtype(v): k for k, v in NUMPY_DTYPES.items()}
_INT32_MAX = planner.INT32_MAX
_NO_GPU_SMS = 132  # choose_tile asked where there is no GPU plans for the H100 SXM the tiles were tuned on
_FORCE_TILE: str | None = None  # tests pin a tile variant ("", "s", "t", "m", "r", "r4", "splitk") on small shapes


# ------------------------------------------------------------------ public --
def matmul(
    A: Any,
    B: Any,
    semiring: str = "maxplus",
    *,
    argmax: bool = False,
    out: Any = None,
    stream: Any = None,
    copy: bool = False,
) -> Any:
    """Tropical product of 2-D ``A`` (M, K) and ``B`` (K, N).

    Returns C (same array type and device as A), or ``(C, K)`` with
    ``argmax=True`` (K: int32 index of the winning k). ``out`` is C, or
    ``(C, K)`` with argmax, C-contiguous. ``stream`` overrides the producer's
    stream. Transposed views (``A.T`` of a C-contiguous array) are read in place;
    other strides raise ValueError unless ``copy=True``.

    NumPy inputs are copied to the GPU and back; where there is no GPU (or under
    ``NUMBA_ENABLE_CUDASIM=1``) they are computed by the NumPy reference, and the
    ``lazykern`` logger says so. Under the simulator, its device arrays are
    computed by the reference too (it cannot run the C++ kernels) and the result
    is a simulator device array.
    """
    if _FORCE_TILE is None:
        return _hot.product(A, B, out, semiring, argmax, stream, copy, False, _product)
    return _product(A, B, semiring, argmax, out, stream, copy, False, None)


def bmm(
    A: Any,
    B: Any,
    semiring: str = "maxplus",
    *,
    argmax: bool = False,
    out: Any = None,
    stream: Any = None,
    copy: bool = False,
    devices: Sequence[int] | None = None,
) -> Any:
    """Batched tropical product (b, M, K) x (b, K, N) -> (b, M, N); a 2-D operand is
    shared by every batch (batch stride 0). Arguments as for :func:`matmul`.

    ``devices=[0, 1, ...]`` splits the batch of host (NumPy) operands across those
    GPUs (as :func:`lazykern.multigpu.bmm_multi` does); ``argmax`` and ``out`` (NumPy arrays)
    work as without it, ``stream`` does not apply (each GPU runs its own streams).
    """
    if devices is not None:
        if stream is not None:
            raise ValueError("bmm(devices=...) runs its own streams on each GPU: leave stream= out")
        _check_args(semiring, argmax, copy)
        return _batch_split.run(
            A, B, semiring=semiring, devices=list(devices), backend=bmm, argmax=bool(argmax), out=out
        )
    if _FORCE_TILE is None:
        return _hot.product(A, B, out, semiring, argmax, stream, copy, True, _product)
    return _product(A, B, semiring, argmax, out, stream, copy, True, None)


def matmul_backward(
    grad_C: Any,
    argmax: Any,
    A_shape: Sequence[int],
    B_shape: Sequence[int],
    *,
    out: tuple[Any, Any] | None = None,
    stream: Any = None,
) -> tuple[Any, Any]:
    """(grad_A, grad_B) of a tropical product from its argmax.

    grad_A[.., i, k] = sum_j grad_C[.., i, j] [argmax[.., i, j] == k], likewise
    grad_B; a 2-D operand of a batched product gets the sum over the batch.
    grad_C must be float32/float64 and C-contiguous, argmax int32 of the same
    shape. ``out=(grad_A, grad_B)``: C-contiguous arrays of A_shape / B_shape and
    grad_C's dtype, where grad_C lives, overwritten (no allocation per call). The
    GPU kernels add with atomics: float sums are not bit-reproducible from run to
    run (as with torch's scatter_add).
    """
    result: tuple[Any, Any] = _hot.backward(grad_C, argmax, A_shape, B_shape, out, stream, _backward)
    return result


def _backward(grad_C: Any, argmax: Any, A_shape: Sequence[int], B_shape: Sequence[int], out: Any, stream: Any,
              key: tuple[Any, ...] | None) -> tuple[Any, Any]:  # fmt: skip
    """The general path of matmul_backward (a miss of the call table): validate, plan, remember the
    call under ``key`` (None: not remembered), run it."""
    A_shape, B_shape = tuple(int(s) for s in A_shape), tuple(int(s) for s in B_shape)
    if _simulated(grad_C.__class__) or _simulated(argmax.__class__):  # the simulator runs no C++: the reference does
        from numba import cuda

        host_g, host_ix = (x.copy_to_host() if _simulated(x.__class__) else x for x in (grad_C, argmax))
        grads = matmul_backward(host_g, host_ix, A_shape, B_shape)
        if out is None:
            return cuda.to_device(grads[0]), cuda.to_device(grads[1])
        for dst, part in zip(out, grads):
            dst.copy_to_device(part)
        return out[0], out[1]
    g = _arrays.as_operand(grad_C, "grad_C")
    ix = _arrays.as_operand(argmax, "argmax")
    if g.dtype.kind != "f":
        raise TypeError(f"grad_C must be float32 or float64, got {g.dtype}")
    if ix.dtype != np.dtype("int32"):
        raise TypeError(f"argmax must be int32 (as matmul(..., argmax=True) returns it), got {ix.dtype}")
    if g.shape != ix.shape:
        raise ValueError(f"grad_C {g.shape} and argmax {ix.shape} must have the same shape")
    _check_backward_shapes(g.shape, A_shape, B_shape)
    if g.on_host != ix.on_host:
        raise ValueError("grad_C and argmax must both be host (NumPy) arrays or both be on the GPU")
    outs = None
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"out must be a pair (grad_A, grad_B), got {type(out).__name__}")
        outs = (
            _check_out(out[0], g.on_host, A_shape, g.dtype, "out[0]"),
            _check_out(out[1], g.on_host, B_shape, g.dtype, "out[1]"),
        )
    if g.on_host:
        gA, gB = reference.matmul_backward(g.host_array(), ix.host_array(), A_shape, B_shape)
        if outs is not None:
            assert out is not None  # outs is made from out
            for dst, src in zip(outs, (gA, gB), strict=True):
                dst.host_array()[...] = src
            return out[0], out[1]
        return _to_host_kind(gA, g), _to_host_kind(gB, g)
    named = [("grad_C", g.device), ("argmax", ix.device)]
    if outs is not None:
        named += [("out[0]", outs[0].device), ("out[1]", outs[1].device)]
    device = _call_device(named, stream)
    for op, name in ((g, "grad_C"), (ix, "argmax")):
        if not _arrays.is_c_contiguous(op):
            raise ValueError(f"{name} must be C-contiguous (call .contiguous() / ascontiguousarray first)")
    with _device.on(device, order=_device.stream_handle(stream) if stream is not None else (g.stream or 0)):
        return _backward_on(g, ix, A_shape, B_shape, out, outs, stream, device, key)


def _backward_on(
    g: Operand,
    ix: Operand,
    A_shape: tuple[int, ...],
    B_shape: tuple[int, ...],
    out: Any,
    outs: tuple[Operand, Operand] | None,
    stream: Any,
    device: int,
    key: tuple[Any, ...] | None,
) -> tuple[Any, Any]:
    """matmul_backward's plan, cached under ``key`` (None: not cached) and run, with ``device`` current."""
    handle = _device.stream_handle(stream) if stream is not None else (g.stream or 0)
    _arrays.stream_wait(handle, ix.stream, device)
    batch = g.shape[0] if len(g.shape) == 3 else 1
    M, N = g.shape[-2], g.shape[-1]
    K = A_shape[-1]
    args, zero = [], []
    for which, shape in (("a", A_shape), ("b", B_shape)):
        s_out = (shape[-2] * shape[-1]) if len(shape) == 3 else 0
        groups, blocks, adds = planner.backward_plan(
            which, g.dtype.itemsize, batch, M, N, K, s_out == 0 and batch > 1, sms=sm_count(device)
        )
        args.append((s_out, groups, blocks))
        zero.append(int(np.prod(shape, dtype=np.int64)) * g.dtype.itemsize if adds else 0)
    (s_a, groups_a, blocks_a), (s_b, groups_b, blocks_b) = args
    launch = None
    if blocks_a + blocks_b:  # one launch makes both gradients (lk::backward_pair)
        kernel = loaded_kernel(Spec("", DTYPE_CODE[g.dtype], kind="backward", grad="ab").name, device)
        scalars = [batch, M, N, K, s_a, s_b, groups_a, groups_b, blocks_a]
        launch = _hot.Launch(kernel, (blocks_a + blocks_b,), BACKWARD_THREADS, scalars)
    fixed = _fixed_handle(g.kind, stream, handle)
    owner = _stream_owner(g.kind, getattr(g.obj, "stream", None), stream)
    call = _hot.BackwardCall(device, g.kind, fixed, g.stream, launch, (zero[0], zero[1]), (A_shape, B_shape), g.dtype,
                             owner)  # fmt: skip
    _hot.remember(key, call)
    out_ptrs = None if outs is None else (outs[0].ptr, outs[1].ptr)
    return call.run(handle, call.on_current(handle), g.ptr, ix.ptr, out, out_ptrs)


def _fixed_handle(kind: str, stream: Any, handle: int) -> int | None:
    """The stream a cached call always uses; None: the operands' library's current one, read per call."""
    return None if stream is None and kind in ("cupy", "torch") else handle


def _stream_owner(kind: str, array_stream: Any, stream: Any) -> Any:
    """The Python object of the stream a call launches on (the caller's, or a Numba array's own,
    ``array_stream``): outputs keep it alive, so their stream-ordered free never meets a destroyed stream."""
    if stream is not None:
        return stream
    return array_stream if kind == "numba" else None


# ------------------------------------------------------------ validation --
def _check_backward_shapes(gshape: tuple[int, ...], A_shape: tuple[int, ...], B_shape: tuple[int, ...]) -> None:
    if len(gshape) not in (2, 3):
        raise ValueError(f"grad_C must be 2-D or 3-D, got shape {gshape}")
    if len(A_shape) not in (2, 3) or len(B_shape) not in (2, 3):
        raise ValueError(f"A_shape {A_shape} and B_shape {B_shape} must be 2-D or 3-D shapes")
    M, N = gshape[-2], gshape[-1]
    if A_shape[-2] != M or B_shape[-1] != N or A_shape[-1] != B_shape[-2]:
        raise ValueError(f"A_shape {A_shape} x B_shape {B_shape} does not give grad_C's shape {gshape}")
    for shp, name in ((A_shape, "A_shape"), (B_shape, "B_shape")):
        if len(shp) == 3 and (len(gshape) != 3 or shp[0] != gshape[0]):
            raise ValueError(f"{name} {shp} has a batch dim that grad_C {gshape} does not match")


def _check_args(semiring: object, argmax: object, copy: object) -> str:
    semiring = reference.check_semiring(semiring)
    if not isinstance(argmax, (bool, np.bool_)):
        raise TypeError(f"argmax must be True or False, got {argmax!r}")
    if not isinstance(copy, (bool, np.bool_)):
        raise TypeError(f"copy must be True or False, got {copy!r}")
    return semiring


def _shapes(a: tuple[int, ...], b: tuple[int, ...], batched: bool) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of A's shape ``a`` and B's ``b``, checking ndim and inner dimensions."""
    if not batched:
        for shape, name in ((a, "A"), (b, "B")):
            if len(shape) != 2:
                raise ValueError(f"matmul needs a 2-D {name}, got {name}.ndim={len(shape)} (use bmm for batches)")
        batch = 1
    else:
        for shape, name in ((a, "A"), (b, "B")):
            if len(shape) not in (2, 3):
                raise ValueError(f"bmm needs a 2-D or 3-D {name}, got {name}.ndim={len(shape)}")
        if len(a) == 2 and len(b) == 2:
            raise ValueError("bmm needs at least one 3-D operand (use matmul for two 2-D ones)")
        if len(a) == 3 and len(b) == 3 and a[0] != b[0]:
            raise ValueError(f"batch mismatch: A has {a[0]} matrices, B has {b[0]}")
        batch = a[0] if len(a) == 3 else b[0]
    M, K = a[-2], a[-1]
    K2, N = b[-2], b[-1]
    if K != K2:
        raise ValueError(f"shape mismatch: A is {a}, B is {b}; A's last dim ({K}) must equal B's rows ({K2})")
    for n, what in ((M, "M"), (N, "N"), (K, "K"), (batch, "batch")):
        if n > _INT32_MAX:
            raise ValueError(f"{what}={n} is too large: the kernels index with 32-bit sizes")
    return batch, M, N, K


def _check_out(out: Any, on_host: bool, shape: tuple[int, ...], dtype: np.dtype, name: str) -> Operand:
    """``out`` described, checked against the call (``on_host``: where the inputs live)."""
    op = _arrays.as_operand(out, name)
    if op.shape != shape:
        raise ValueError(f"{name} has shape {op.shape}, expected {shape}")
    if op.dtype != dtype:
        raise TypeError(f"{name} has dtype {op.dtype}, expected {dtype}")
    if op.on_host != on_host:
        raise ValueError(f"{name} must live where the inputs do ({'host' if on_host else 'GPU'})")
    if not _arrays.is_c_contiguous(op):
        raise ValueError(f"{name} must be C-contiguous, got strides {op.strides} (in elements)")
    return op


# ------------------------------------------------------------------ core --
def _product(A: Any, B: Any, semiring: Any, argmax: Any, out: Any, stream: Any, copy: Any, batched: bool,
             key: tuple[Any, ...] | None) -> Any:  # fmt: skip
    """The general path of a product (a miss of the call table, or a pinned tile): describe,
    validate, plan, remember the call under ``key`` (None: not remembered), run it.

    It reads top to bottom: each operand is described once (:func:`_arrays.as_operand`) and only
    its fields go to the helpers, so the walk of ``A`` from :func:`matmul` to the launch stays
    short (``tests/test_tropical_hot.py`` counts it)."""
    if _simulated(A.__class__) or _simulated(B.__class__):
        return _sim_product(A, B, semiring, argmax, out, batched)
    semiring = _check_args(semiring, argmax, copy)
    argmax = bool(argmax)
    a = _arrays.as_operand(A, "A")
    on_host = a.kind in _arrays.HOST_KINDS
    b = _arrays.as_operand(B, "B")
    if a.dtype != b.dtype:
        raise TypeError(f"A is {a.dtype} but B is {b.dtype}; convert one so both have the same dtype")
    batch, M, N, K = _shapes(a.shape, b.shape, batched)
    out_shape = (batch, M, N) if batched else (M, N)
    if on_host != b.on_host:
        raise ValueError(
            f"A is {'a host' if on_host else 'a GPU'} array but B is {'a host' if b.on_host else 'a GPU'} "
            "array: put both on the same device"
        )
    c_op, i_op = _split_out(out, argmax, a.dtype, on_host, out_shape)
    la, lb = planner.operand_layout(a.shape, a.strides), planner.operand_layout(b.shape, b.strides)
    if la is None:  # one rule on the host and the GPU: read in place, or copy only when asked
        a, la = _copied(a, "A", copy)
    if lb is None:
        b, lb = _copied(b, "B", copy)
    if on_host:
        return _host_product(a, b, semiring, argmax, c_op, i_op, stream, batched)
    named = [("A", a.device), ("B", b.device)]
    named += [(name, op.device) for name, op in ((_out_name(argmax), c_op), ("out[1]", i_op)) if op is not None]
    device = _call_device(named, stream)
    owner = _stream_owner(a.kind, getattr(a.obj, "stream", None), stream)
    handle = _device.stream_handle(stream) if stream is not None else (a.stream or 0)
    with _device.on(device, order=handle):  # a first call on device 1, device 0 current: ordered as the hot path
        _arrays.stream_wait(handle, a.stream, device)  # CAI v3: order after each producer's stream
        _arrays.stream_wait(handle, b.stream, device)
        if batch == 0 or M == 0 or N == 0:
            return _empty_result(a.kind, a.dtype, owner, out, out_shape, argmax, device, handle)
        fixed = _fixed_handle(a.kind, stream, handle)
        call = _product_call(device, (batch, M, N, K), a.dtype, la, lb, semiring, argmax, batched,
                             (a.kind, fixed, a.stream, owner))  # fmt: skip
        _hot.remember(key, call)
        out_ptrs = None if c_op is None else (c_op.ptr, i_op.ptr if i_op is not None else 0)  # c_op: out was given
        return call.run(handle, call.on_current(handle), a.ptr, b.ptr, out, out_ptrs)


Layout = tuple[str, int, int]


def _copied(op: Operand, name: str, copy: bool) -> tuple[Operand, Layout]:
    """A C-contiguous copy of ``op`` and its layout (``copy=True``), for strides the kernels
    cannot read in place (:func:`plan.operand_layout`); ValueError otherwise."""
    if not copy:
        raise ValueError(
            f"{name} has strides {op.strides} (in elements) that the kernels cannot read in place: "
            "pass a C-contiguous array or its transpose (X.T), or copy=True to copy it"
        )
    c = _arrays.as_operand(_arrays.contiguous_copy(op, name), name)
    layout = planner.operand_layout(c.shape, c.strides)
    assert layout is not None  # a C-contiguous array is always read in place
    return c, layout


def _out_name(argmax: bool) -> str:
    return "out[0]" if argmax else "out"


def _call_device(named: list[tuple[str, int | None]], stream: Any) -> int:
    """The device a call runs on: its arrays' one (ValueError for two), checked against ``stream``'s;
    the current device (0 where none is) when no array names one."""
    device = _device.common(named)
    s_dev = _device.of_stream(stream)
    if s_dev is not None and device is not None and s_dev != device:
        raise ValueError(
            f"stream belongs to device {s_dev} but the arrays are on device {device}: "
            "pass a stream of the arrays' device (or none: the arrays' own stream is used)"
        )
    return _device.resolve_or_current(device if device is not None else s_dev)


def _product_call(device: int, dims: tuple[int, int, int, int], dtype: np.dtype, la: Layout, lb: Layout,
                  semiring: str, argmax: bool, batched: bool,
                  stream: tuple[str, int | None, int | None, Any]) -> _hot.ProductCall:  # fmt: skip
    """The planned call of a product on ``device`` (current): kernels loaded, scalars packed.
    ``stream`` is (operands' kind, fixed handle or None, producer stream, stream owner)."""
    batch, M, N, K = dims
    out_shape = (batch, M, N) if batched else (M, N)
    plan = _plan(semiring, dtype, argmax, la[0] + lb[0], batch, M, N, K, batched, sm_count(device))
    reduce, ws = None, (0, 0)
    if plan.kind == "rows":
        (ars, acs), (brs, bcs) = _element_strides(la), _element_strides(lb)
        args = [M, N, K, ars, acs, brs, bcs, N, batch, la[2], lb[2], M * N]
    elif plan.kind == "splitk":
        args = [M, N, K, la[1], lb[1], N, batch, la[2], lb[2], M * N, plan.splits, plan.kslice]
        if plan.reduce:  # slices into a workspace, folded by the reduce (one slice writes C itself)
            reduce_args = [M * N, batch, plan.splits, plan.kslice]
            reduce = _hot.Launch(loaded_kernel(plan.reduce, device), (plan.reduce_blocks,), REDUCE_THREADS,
                                 reduce_args)  # fmt: skip
            ws = _workspace_bytes(batch * plan.splits * M * N, dtype.itemsize, argmax)
    else:
        args = [M, N, K, la[1], lb[1], N]
        if batched:
            args += [batch, la[2], lb[2], M * N]
    main = _hot.Launch(loaded_kernel(plan.name, device), plan.grid, plan.threads, args)
    kind, fixed, producer, owner = stream
    return _hot.ProductCall(device, kind, fixed, producer, main, reduce, out_shape, dtype, argmax, ws, owner)


def _empty_result(kind: str, dtype: np.dtype, owner: Any, out: Any, shape: tuple[int, ...], argmax: bool,
                  device: int, handle: int) -> Any:  # fmt: skip
    """The result of a product with no output elements (operands of ``kind``, ``dtype``): nothing to launch."""
    if out is not None:
        return out
    made = _hot.out_kind(kind)
    ctx = _device.primary_context(device) if made == "numba" else None
    parts = [(shape, dtype), (shape, np.dtype("int32"))] if argmax else [(shape, dtype)]
    return _hot.Outs(made, tuple(parts), device).new(device, handle, False, ctx, lambda: owner)[0]


def _workspace_bytes(n: int, itemsize: int, argmax: bool) -> tuple[int, int]:
    """(bytes, offset of the argmax part) of a split-K workspace of ``n`` partial results.

    Allocated per call from the stream-ordered pool and freed right after the reduce,
    on the same stream: the pool hands the same memory to the next call at no cost,
    and inside a capture it is an allocation and a free node of the graph.
    """
    values = -(-n * itemsize // 256) * 256
    return values + (4 * n if argmax else 0), values


def _element_strides(lay: tuple[str, int, int]) -> tuple[int, int]:
    """(row stride, column stride) in elements of a "n" (row-major) or "t" (transposed) operand."""
    return (lay[1], 1) if lay[0] == "n" else (1, lay[1])


def _split_out(out: Any, argmax: bool, dtype: np.dtype, on_host: bool,
               shape: tuple[int, ...]) -> tuple[Operand | None, Operand | None]:  # fmt: skip
    """``out`` described and checked: (C, argmax or None), or (None, None) without ``out``."""
    if out is None:
        return None, None
    if argmax:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("with argmax=True, out must be a (C, argmax) pair of arrays")
        return (
            _check_out(out[0], on_host, shape, dtype, _out_name(True)),
            _check_out(out[1], on_host, shape, np.dtype("int32"), "out[1]"),
        )
    if isinstance(out, tuple):
        raise TypeError("out must be one array (a (C, argmax) pair only with argmax=True)")
    return _check_out(out, on_host, shape, dtype, _out_name(False)), None


def _plan(semiring: str, dtype: np.dtype, argmax: bool, layout: str, batch: int, M: int, N: int, K: int,
          batched: bool, sms: int) -> planner.Plan:  # fmt: skip
    # Not memoized: only a miss of the call table plans, and planning is pure arithmetic.
    code = DTYPE_CODE[dtype]
    return planner.make_plan(semiring, code, argmax, layout, batch, M, N, K, batched, sms=sms, tile=_FORCE_TILE)


def choose_tile(
    dtype: str, argmax: bool, batch: int, M: int, N: int, K: int | None = None, *, sms: int | None = None
) -> str:
    """The tile variant :func:`matmul` picks for a shape (see :func:`lazykern.tropical.plan.choose_tile`)
    on a GPU with ``sms`` SMs: by default the current device's, or an H100's where there is no GPU."""
    return planner.choose_tile(dtype, argmax, batch, M, N, K, sms=planned_sms(sms))


def planned_sms(sms: int | None = None) -> int:
    """``sms``, or where None the current device's SM count (an H100's where there is no GPU)."""
    if sms is None:
        return sm_count(_device.resolve_or_current(None)) if gpu_available() else _NO_GPU_SMS
    return sms


@functools.cache
def sm_count(device: int) -> int:
    from numba import cuda

    return int(cuda.gpus[device].MULTIPROCESSOR_COUNT)


def loaded_kernel(name: str, device: int) -> Kernel:
    """The family's kernel ``name`` for ``device`` (the family keeps one per arch: no table here)."""
    return family.get(name, arch=_device.arch(device))


# ---------------------------------------------------------------- host path --
@functools.cache
def gpu_available() -> bool:
    from ..compile.compiler import device_compute_capability

    return device_compute_capability() is not None


def _host_product(
    a: Operand,
    b: Operand,
    semiring: str,
    argmax: bool,
    c_op: Operand | None,
    i_op: Operand | None,
    stream: Any,
    batched: bool,
) -> Any:
    A, B = a.host_array(), b.host_array()
    fn = reference.bmm if batched else reference.matmul
    if gpu_available():
        from numba import cuda

        with _device.on(_call_device([], stream)):  # the stream's device, else the current one
            dA, dB = cuda.to_device(np.ascontiguousarray(A)), cuda.to_device(np.ascontiguousarray(B))
            res = (bmm if batched else matmul)(dA, dB, semiring, argmax=argmax, stream=stream)
            handle = _device.stream_handle(stream)
            if handle:
                from cuda.bindings import driver

                driver.cuStreamSynchronize(handle)
            res = tuple(r.copy_to_host() for r in res) if argmax else res.copy_to_host()
    else:
        log.info(
            "tropical.%s: no GPU (or the CUDA simulator): computing %s %s x %s on the CPU with the NumPy reference",
            "bmm" if batched else "matmul",
            semiring,
            A.shape,
            B.shape,
        )
        res = fn(A, B, semiring, argmax)
    parts = list(res) if argmax else [res]
    for i, op in enumerate((c_op, i_op) if argmax else (c_op,)):
        if op is not None:
            np.copyto(op.host_array(), parts[i])
            parts[i] = op.obj
        else:
            parts[i] = _to_host_kind(parts[i], a)
    return tuple(parts) if argmax else parts[0]


def _simulated(cls: type) -> bool:
    """Whether ``cls`` is an array type of Numba's CUDA simulator."""
    return cls.__module__.startswith(internals.SIMULATOR_MODULE)


def _sim_product(A: Any, B: Any, semiring: Any, argmax: Any, out: Any, batched: bool) -> Any:
    """Simulator device arrays: the CUDA simulator runs no C++, so the NumPy reference computes the
    product (the host path logs that) and the result comes back as simulator device arrays."""
    from numba import cuda

    host = [x.copy_to_host() if _simulated(x.__class__) else x for x in (A, B)]
    res = (bmm if batched else matmul)(host[0], host[1], semiring, argmax=argmax)
    parts = list(res) if argmax else [res]
    outs = list(out) if argmax and out is not None else [out] * len(parts)
    for i, (dst, part) in enumerate(zip(outs, parts)):
        if dst is None:
            parts[i] = cuda.to_device(part)
        else:
            dst.copy_to_device(part)
            parts[i] = dst
    return tuple(parts) if argmax else parts[0]


def _to_host_kind(x: np.ndarray, like: Operand) -> Any:
    if like.kind == "torch_cpu":
        import torch

        return torch.from_numpy(np.ascontiguousarray(x))
    return x


@contextmanager
def forced_tile(tile: str) -> Iterator[None]:
    """Within the block every product uses tile variant ``tile`` ("", "s", "t", "m", "r", "r4", "splitk")
    instead of the planner's choice; a shape the variant cannot take raises ValueError
    (:mod:`lazykern.tropical.tuning` is where tile sweeps and tests import it from)."""
    global _FORCE_TILE
    before = _FORCE_TILE
    _FORCE_TILE = tile
    try:
        yield
    finally:
        _FORCE_TILE = before

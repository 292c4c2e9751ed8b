"""A permuted copy of a tensor whose axes all hold two entries but one, as one bit permutation (``tn_permute``).

The tensors of binary problems (independent sets, cuts, spin glasses) have one axis of 2 per variable,
and a contraction step that cannot read an operand in place copies it into (batch, left, contracted)
order. CuPy's copy of a permuted view computes each element's address with one 64-bit division and
modulo per axis: on an H100 a 2^29-entry step operand of 29 axes took 17 ms to copy, eight times the
product that followed. Here output entry ``o`` (its bits are the output axes, the last axis bit 0)
reads the source at sum_b bit_b(o) * stride_b: shifts and adds, the copy bound by memory. The bits are
moved as raw 4- or 8-byte words, so one kernel per item size serves every dtype of that size exactly,
and the fragment is compiled once into the lazykern store (no CuPy kernel is compiled for the copy).
An algebra of several parts (k-best: values, counts, residues) copies an operand's parts of one dtype
in one launch (``permute_bits_parts_*``: each source offset computed once for all of them) into one
allocation: a CountingMax(2) step's 6 parts take 2 launches and 2 allocations, not 6 and 6.
One axis of another extent (a graph polynomial's evaluation points, a batch of its primes) is read
off the output index by one division: entry o = (hi * extent + e) * 2^low + lo reads the bits of
``lo`` and ``hi`` as above plus e times that axis's stride. CuPy's copy of such a tensor (a
polynomial step's 2^27-entry float64 operand) ran at 80 GB/s on an H100.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import _fork
from ..families.family import KernelFamily
from ..launch import _device

if TYPE_CHECKING:
    from ..store.cache import KernelCache

BITS_MAX = 40  # axes of 2 a copy handles (2^40 entries: far past any device's memory)
THREADS = 256
_MAX_BLOCKS = 132 * 32
WORDS = {4: "unsigned int", 8: "unsigned long long"}  # item size -> the word moved
WIDE = ["int32", "int64", "int64"]  # the axis of another extent: bits below it, its extent, its stride
SIGNATURE = ["ptr", "ptr", "int64", "int32"] + WIDE + ["int64"] * BITS_MAX
PARTS_MAX = 8  # arrays of one shape, strides and item size one launch copies (a k-best operand holds 2 to 12)
PARTS_SIGNATURE = ["ptr"] * PARTS_MAX + ["ptr", "int64", "int32", "int32"] + WIDE + ["int64"] * BITS_MAX

PREAMBLE = """
// The source offset of output entry o: its bits (the axes of 2) at their strides, and where one axis
// holds ``extent`` > 1 entries (``low`` bits below it), its index e at ``wide`` apart.
template <int BITS>
__device__ __forceinline__ long long lk_permute_source(long long o, int bits, int low, long long extent,
                                                       long long wide, const long long *stride) {
    long long at = 0;
    if (extent > 1) {
        const long long rest = o >> low;
        const long long hi = rest / extent;
        at = (rest - hi * extent) * wide;
        o = (o & ((1LL << low) - 1)) | (hi << low);
    }
#pragma unroll
    for (int b = 0; b < BITS; ++b) {
        if (b >= bits) break;
        if ((o >> b) & 1) at += stride[b];
    }
    return at;
}

template <typename W, int BITS>
__device__ __forceinline__ void lk_permute_bits(const W *__restrict__ src, W *__restrict__ dst,
                                                long long total, int bits, int low, long long extent,
                                                long long wide, const long long *stride) {
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (long long)gridDim.x * blockDim.x) {
        dst[o] = src[lk_permute_source<BITS>(o, bits, low, extent, wide, stride)];
    }
}

// Several arrays of one shape and strides (an algebra's parts) into one allocation, part q at q * total:
// each entry's source offset computed once for all of them.
template <typename W, int BITS, int PARTS>
__device__ __forceinline__ void lk_permute_bits_parts(const W *const *src, W *__restrict__ dst, long long total,
                                                      int parts, int bits, int low, long long extent,
                                                      long long wide, const long long *stride) {
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (long long)gridDim.x * blockDim.x) {
        const long long at = lk_permute_source<BITS>(o, bits, low, extent, wide, stride);
#pragma unroll
        for (int q = 0; q < PARTS; ++q) {
            if (q >= parts) break;
            dst[q * total + o] = src[q][at];
        }
    }
}
"""


def kernel_name(itemsize: int, parts: bool = False) -> str:
    return f"permute_bits_parts_{itemsize}" if parts else f"permute_bits_{itemsize}"


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    fam = KernelFamily("tn_permute", PREAMBLE, cache=cache)
    params = ", ".join(f"long long s{b}" for b in range(BITS_MAX))
    strides = ", ".join(f"s{b}" for b in range(BITS_MAX))
    for itemsize, word in WORDS.items():
        name = kernel_name(itemsize)
        code = (
            f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const {word} *src, {word} *dst, '
            f"long long total, int bits, int low, long long extent, long long wide, {params}) {{\n"
            f"    const long long stride[{BITS_MAX}] = {{{strides}}};\n"
            f"    lk_permute_bits<{word}, {BITS_MAX}>(src, dst, total, bits, low, extent, wide, stride);\n}}\n"
        )
        fam.add(name, code, signature=SIGNATURE)
        name = kernel_name(itemsize, parts=True)
        srcs = ", ".join(f"const {word} *src{q}" for q in range(PARTS_MAX))
        code = (
            f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}({srcs}, {word} *dst, '
            f"long long total, int parts, int bits, int low, long long extent, long long wide, {params}) {{\n"
            f"    const {word} *const src[{PARTS_MAX}] = {{{', '.join(f'src{q}' for q in range(PARTS_MAX))}}};\n"
            f"    const long long stride[{BITS_MAX}] = {{{strides}}};\n"
            f"    lk_permute_bits_parts<{word}, {BITS_MAX}, {PARTS_MAX}>(src, dst, total, parts, bits, low, extent, "
            f"wide, stride);\n}}\n"
        )
        fam.add(name, code, signature=PARTS_SIGNATURE)
    return fam


_family: KernelFamily | None = None


def family() -> KernelFamily:
    """The process's ``tn_permute`` family, made on first use."""
    global _family
    if _family is None:
        _family = make_family()
        _kernels.clear()
    return _family


def bit_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int] | None:
    """The source's element stride of each bit of a C-order output index (bit 0: the last axis of 2),
    or None when an axis holds other than 1 or 2 entries or more than BITS_MAX hold 2."""
    if any(n not in (1, 2) for n in shape):
        return None
    out = [s for n, s in zip(shape, strides) if n == 2][::-1]
    return out if len(out) <= BITS_MAX else None


class Wide(NamedTuple):
    """The one axis of an extent other than 1 or 2: the bits (axes of 2) below it, its extent, its
    stride (extent 1: there is none)."""

    low: int
    extent: int
    stride: int


NARROW = Wide(0, 1, 0)


def layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[list[int], Wide] | None:
    """:func:`bit_strides` of the axes of 2, and the one axis of another extent (:class:`Wide`); None
    for two or more such axes, or more than BITS_MAX axes of 2."""
    wide = [a for a, n in enumerate(shape) if n not in (1, 2)]
    if len(wide) > 1:
        return None
    bits = bit_strides(tuple(1 if a in wide else n for a, n in enumerate(shape)), strides)
    if bits is None:
        return None
    if not wide:
        return bits, NARROW
    a = wide[0]
    return bits, Wide(sum(n == 2 for n in shape[a + 1 :]), int(shape[a]), int(strides[a]))


def reference(flat: np.ndarray, offset: int, bits: list[int], wide: Wide = NARROW) -> np.ndarray:
    """What the kernel writes, on the host: entry o of the result reads ``flat[offset + at(o)]``."""
    o = np.arange(wide.extent << len(bits), dtype=np.int64)
    rest = o >> wide.low
    e, hi = rest % wide.extent, rest // wide.extent
    o = (o & ((1 << wide.low) - 1)) | (hi << wide.low)
    at = e * wide.stride
    for b, s in enumerate(bits):
        at += ((o >> b) & 1) * s
    out: np.ndarray = flat[offset + at]
    return out


def copy(be: Any, x: Any) -> Any | None:
    """A C-contiguous copy of the GPU array ``x`` made by the bit-permutation kernel, or None when
    ``x`` is not of that kind (two axes of sizes other than 1 or 2, an item size other than 4 or 8)."""
    shape = tuple(int(n) for n in x.shape)
    itemsize = be.dtype(x).itemsize
    found = layout(shape, be.strides(x))
    if found is None or itemsize not in WORDS:
        return None
    bits, wide = found
    if be.xp is np:  # the GPU route run on the host (tests): the kernel's addressing, by its reference
        if min([*bits, wide.stride], default=0) < 0:
            return None
        return _host_copy(x, bits, wide, shape)
    from ..tropical import _arrays

    out = be.empty(x, shape)
    total = wide.extent << len(bits)
    dst = _arrays.as_operand(out, "out")  # its device and stream; the source's address read directly
    device = _device.resolve_or_current(_device.common([("x", be.device_of(x)), ("out", dst.device)]))
    blocks = min(-(-total // THREADS), _MAX_BLOCKS)
    padded = bits + [0] * (BITS_MAX - len(bits))
    with _device.on(device):
        kernel = _kernel(kernel_name(itemsize), device)
        kernel[(blocks,), (THREADS,), dst.stream or 0](
            be.pointer(x), dst.ptr, total, np.int32(len(bits)), np.int32(wide.low), wide.extent, wide.stride, *padded
        )
    return out


def copy_parts(be: Any, parts: tuple[Any, ...], alike: bool = False) -> tuple[Any, ...] | None:
    """C-contiguous copies of GPU arrays of one shape and one set of strides (an algebra's parts), each
    dtype's by one launch into one allocation (:meth:`Backend.empty_parts`: the copies are views of it);
    None when they have two axes of sizes other than 1 or 2, an item size other than 4 or 8, or differ in
    shape or strides. A k-best
    operand of 6 parts costs 2 launches and 2 allocations instead of 6 and 6. ``alike``: the caller has
    seen that the parts share shape and strides (they are not compared again)."""
    x = parts[0]
    shape = tuple(int(n) for n in x.shape)
    strides = be.strides(x)
    found = layout(shape, strides)
    if found is None:
        return None
    bits, wide = found
    if not alike and any(tuple(int(n) for n in p.shape) != shape or be.strides(p) != strides for p in parts[1:]):
        return None
    dtypes = [be.dtype(p) for p in parts]
    if any(d.itemsize not in WORDS for d in dtypes):
        return None
    if be.xp is np:
        if min([*bits, wide.stride], default=0) < 0:
            return None
        out: tuple[Any, ...] = be.empty_parts(parts, shape)
        for p, o in zip(parts, out):
            o[...] = _host_copy(p, bits, wide, shape)
        return out
    from ..tropical import _arrays

    out = tuple(be.empty_parts(parts, shape))
    total = wide.extent << len(bits)
    placed = (np.int32(wide.low), wide.extent, wide.stride)
    blocks = min(-(-total // THREADS), _MAX_BLOCKS)
    padded = bits + [0] * (BITS_MAX - len(bits))
    dst = _arrays.as_operand(out[0], "out")  # the device and stream, once for every part
    device = _device.resolve_or_current(_device.common([("x", be.device_of(x)), ("out", dst.device)]))
    runs: dict[np.dtype, list[int]] = {}
    for i, d in enumerate(dtypes):
        runs.setdefault(d, []).append(i)
    with _device.on(device):
        for d, at in runs.items():
            if len(at) == 1:  # a dtype of one part (counting's value and count): the single copy's kernel
                kernel = _kernel(kernel_name(d.itemsize), device)
                kernel[(blocks,), (THREADS,), dst.stream or 0](
                    be.pointer(parts[at[0]]), be.pointer(out[at[0]]), total, np.int32(len(bits)), *placed, *padded
                )
                continue
            kernel = _kernel(kernel_name(d.itemsize, parts=True), device)
            for start in range(0, len(at), PARTS_MAX):
                chunk = at[start : start + PARTS_MAX]
                src = [be.pointer(parts[i]) for i in chunk]
                src += [src[0]] * (PARTS_MAX - len(src))  # the kernel reads only the first ``len(chunk)``
                # empty_parts lays one dtype's parts out back to back: the chunk's first is their base
                kernel[(blocks,), (THREADS,), dst.stream or 0](
                    *src,
                    be.pointer(out[chunk[0]]),
                    total,
                    np.int32(len(chunk)),
                    np.int32(len(bits)),
                    *placed,
                    *padded,
                )
    return out


def _host_copy(x: np.ndarray, bits: list[int], wide: Wide, shape: tuple[int, ...]) -> np.ndarray:
    reach = sum(bits) + (wide.extent - 1) * wide.stride + 1
    span = np.lib.stride_tricks.as_strided(x, (reach,), (x.itemsize,), writeable=False)
    return reference(span, 0, bits, wide).reshape(shape)


_kernels: dict[tuple[str, int | None], Any] = {}


def _kernel(name: str, device: int | None) -> Any:
    """The loaded kernel ``name`` for ``device``: the family's lookup (arch string normalized, a lock
    on a miss) once per device, then one dict hit (a k-best call copies hundreds of parts)."""
    found = _kernels.get((name, device))
    if found is None:
        found = _kernels[(name, device)] = family().get(name, arch=_device.arch(device))
    return found


@_fork.on_child
def _forget() -> None:
    """A forked child loads its own kernels (the parent's modules belong to the parent's contexts)."""
    _kernels.clear()

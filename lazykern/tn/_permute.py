"""A permuted copy of a tensor whose axes all hold two entries but one, as one bit permutation (``tn_permute``).

The tensors of binary problems (independent sets, cuts, spin glasses) have one axis of 2 per variable,
and a contraction step that cannot read an operand in place copies it into (batch, left, contracted)
order. CuPy's copy of a permuted view computes each element's address with one 64-bit division and
modulo per axis: on an H100 a 2^29-entry step operand of 29 axes took 17 ms to copy, eight times the
product that followed. Here output entry ``o`` (its bits are the output axes, the last axis bit 0)
reads the source at sum_b bit_b(o) * stride_b, read 5 bits at a time from tables in shared memory (a
bit at a time, 40 of them, bound the copy by its instructions at 650 GB/s on an H200; the tables and 8
entries a thread a round, their loads issued together, reach 2.9 TB/s of the device's 4.2). The bits are
moved as raw 4- or 8-byte words, so one kernel per item size serves every dtype of that size exactly,
and the fragment is compiled once into the lazykern store (no CuPy kernel is compiled for the copy).
An algebra of several parts (k-best: values, counts, residues) copies an operand's parts of one dtype
in one launch (``permute_bits_parts_*``: each source offset computed once for all of them) into one
allocation: a CountingMax(2) step's 6 parts take 2 launches and 2 allocations, not 6 and 6.
One axis of another extent (a graph polynomial's evaluation points, a batch of its primes) is read
off the output index by one division: entry o = (hi * extent + e) * 2^low + lo reads the bits of
``lo`` and ``hi`` as above plus e times that axis's stride. CuPy's copy of such a tensor (a
polynomial step's 2^27-entry float64 operand) ran at 80 GB/s on an H100.
Where the output's lowest bits are not the source's nearest (a step operand transposed so its
contracted axes come last), the plain copy's reads do not coalesce: those copies (2^10 entries or
more, no wide axis) take the tiled kernel (``permute_tiled_*``, :mod:`._permute_tile`), 2.2-4.9x the
plain one on 2^28 float32 entries on an H200 (benchmarks/permute_bench.py, session 60); a block moves 8
tiles of 4-byte entries a round (4 of 8-byte ones), 2.3-2.7 TB/s (``ROUNDS``, session 75).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import _fork
from ..families.family import KernelFamily
from ..launch import _device
from . import _permute_tile
from ._permute_tile import TILE_BITS, tiling

if TYPE_CHECKING:
    from ..store.cache import KernelCache

BITS_MAX = 40  # axes of 2 a copy handles (2^40 entries: far past any device's memory)
THREADS = 256
_MAX_BLOCKS = 132 * 32
# item size -> the word moved; 2: the 128-bit counting pass's int16 values (:mod:`.counts.wide`), which CuPy's
# own copy compiled a kernel for per rank the first time a machine ran one (session 81)
WORDS = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
WIDE = ["int32", "int64", "int64"]  # the axis of another extent: bits below it, its extent, its stride
SIGNATURE = ["ptr", "ptr", "int64", "int32"] + WIDE + ["int64"] * BITS_MAX
PARTS_MAX = 8  # arrays of one shape, strides and item size one launch copies (a k-best operand holds 2 to 12)
PARTS_SIGNATURE = ["ptr"] * PARTS_MAX + ["ptr", "int64", "int32", "int32"] + WIDE + ["int64"] * BITS_MAX
TILED_SIGNATURE = ["ptr"] * PARTS_MAX + ["ptr", "int64", "int32", "int32"] + ["int64"] * (BITS_MAX + TILE_BITS + 3)

PREAMBLE = """
// The source offset of output entry o: its bits (the axes of 2) at their strides, and where one axis
// holds ``extent`` > 1 entries (``low`` bits below it), its index e at ``wide`` apart. The bits are read
// 5 at a time from tables in shared memory (entry l of table c: the strides of the set bits of l, as
// bits 5 c to 5 c + 4): a bit at a time, 40 of them, made the copy bound by its instructions (about
// 670 GB/s on an H200, where the device copies 4.2 TB/s; session 75).
template <int BITS>
struct LkBitTables {
    static constexpr int CHUNKS = (BITS + 4) / 5;
    long long at[CHUNKS][32];
};

template <int BITS>
__device__ __forceinline__ void lk_bit_tables(LkBitTables<BITS> &t, int bits, const long long *stride) {
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
#pragma unroll
        for (int c = 0; c < LkBitTables<BITS>::CHUNKS; ++c) {
            long long s = 0;
#pragma unroll
            for (int i = 0; i < 5; ++i) {
                const int b = 5 * c + i;
                if (b < bits && ((lane >> i) & 1)) s += stride[b];
            }
            t.at[c][lane] = s;
        }
    }
    __syncthreads();
}

template <int BITS>
__device__ __forceinline__ long long lk_permute_source(long long o, int chunks, int low, long long extent,
                                                       long long wide, const LkBitTables<BITS> &t) {
    long long at = 0;
    if (extent > 1) {
        const long long rest = o >> low;
        const long long hi = rest / extent;
        at = (rest - hi * extent) * wide;
        o = (o & ((1LL << low) - 1)) | (hi << low);
    }
#pragma unroll
    for (int c = 0; c < LkBitTables<BITS>::CHUNKS; ++c) {
        if (c >= chunks) break;
        at += t.at[c][(o >> (5 * c)) & 31];
    }
    return at;
}

// Several arrays of one shape and strides (an algebra's parts) into one allocation, part q at q * total:
// each entry's source offset computed once for all of them.
template <typename W, int BITS, int PARTS, int U>
__device__ __forceinline__ void lk_permute_bits_parts(const W *const *src, W *__restrict__ dst, long long total,
                                                      int parts, int bits, int low, long long extent,
                                                      long long wide, const long long *stride) {
    __shared__ LkBitTables<BITS> t;
    lk_bit_tables<BITS>(t, bits, stride);
    const int chunks = (bits + 4) / 5;
    const long long step = (long long)gridDim.x * blockDim.x;
    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; o + (U - 1) * step < total; o += U * step) {
        long long at[U];
#pragma unroll
        for (int u = 0; u < U; ++u) at[u] = lk_permute_source<BITS>(o + u * step, chunks, low, extent, wide, t);
#pragma unroll
        for (int q = 0; q < PARTS; ++q) {
            if (q >= parts) break;
            W v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = src[q][at[u]];
#pragma unroll
            for (int u = 0; u < U; ++u) dst[q * total + o + u * step] = v[u];
        }
    }
    for (; o < total; o += step) {
        const long long at = lk_permute_source<BITS>(o, chunks, low, extent, wide, t);
#pragma unroll
        for (int q = 0; q < PARTS; ++q) {
            if (q >= parts) break;
            dst[q * total + o] = src[q][at];
        }
    }
}

// One array: the parts kernel's loop with one part. Each thread moves U entries a round, their U loads
// issued before any store: more bytes in flight.
template <typename W, int BITS, int U>
__device__ __forceinline__ void lk_permute_bits(const W *__restrict__ src, W *__restrict__ dst,
                                                long long total, int bits, int low, long long extent,
                                                long long wide, const long long *stride) {
    const W *const one[1] = {src};
    lk_permute_bits_parts<W, BITS, 1, U>(one, dst, total, 1, bits, low, extent, wide, stride);
}

// Tiled (lazykern/tn/_permute_tile.py): 2^10 entries per tile through shared memory, read in source
// order, written in output order, by exactly 256 threads (4 entries each). ``near``: the tile bits'
// source strides, nearest first; ``ranks`` (4 bits each): each one's slot bit in output order; ``outs``
// (6 bits each): the output bit of each slot bit; ``mask``: the tile's output bits. Each thread's four
// source offsets, slots and output offsets within a tile are fixed: they are worked out once, into
// registers, and a tile's base (the other bits: the tile's number) is read from 5-bit tables.
__device__ __forceinline__ int lk_swizzle(int t) { return t ^ ((t >> 5) & 31); }

template <typename W, int BITS, int PARTS, int U>
__device__ __forceinline__ void lk_permute_tiled(const W *const *src, W *__restrict__ dst, long long total,
                                                 int parts, int bits, const long long *stride,
                                                 const long long *near, long long ranks, long long outs,
                                                 long long mask) {
    constexpr int CHUNKS = (BITS - 10 + 4) / 5;  // 5-bit pieces of a tile's number
    __shared__ W tile[U][1024];
    __shared__ long long src_lo[32], src_hi[32], out_hi[32];
    __shared__ int at_lo[32], at_hi[32];
    __shared__ long long base_src[CHUNKS][32], base_out[CHUNKS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x < 32) {
        long long sl = 0, sh = 0, oh = 0;
        int tl = 0, th = 0;
#pragma unroll
        for (int i = 0; i < 5; ++i) {
            if ((lane >> i) & 1) {
                sl += near[i];
                sh += near[i + 5];
                tl |= 1 << ((ranks >> (4 * i)) & 15);
                th |= 1 << ((ranks >> (4 * (i + 5))) & 15);
                oh += 1LL << ((outs >> (6 * (i + 5))) & 63);
            }
        }
        src_lo[lane] = sl, src_hi[lane] = sh, out_hi[lane] = oh, at_lo[lane] = tl, at_hi[lane] = th;
        // the tile number's bits are the output bits outside ``mask``, lowest first, 5 to a table
        int c = 0, i = 0;
        long long s = 0, o = 0;
        for (int b = 0; b < bits; ++b) {
            if ((mask >> b) & 1) continue;
            if ((lane >> i) & 1) {
                s += stride[b];
                o += 1LL << b;
            }
            if (++i == 5) {
                base_src[c][lane] = s, base_out[c][lane] = o;
                ++c, i = 0, s = 0, o = 0;
            }
        }
        for (; c < CHUNKS; ++c, s = 0, o = 0) base_src[c][lane] = s, base_out[c][lane] = o;
    }
    __syncthreads();
    // the output's 5 lowest bits are the tile's 5 lowest slot bits: entry t of a tile lies at t & 31
    // plus out_hi[t >> 5]; a thread's t >> 5 is warp + 8 k, its t & 31 its lane, for k = 0 .. 3
    long long from_k[4], to_k[4];
    int fill_k[4], read_k[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        from_k[k] = src_lo[lane] + src_hi[warp + 8 * k];
        fill_k[k] = lk_swizzle(at_lo[lane] | at_hi[warp + 8 * k]);
        to_k[k] = lane + out_hi[warp + 8 * k];
        read_k[k] = lk_swizzle(threadIdx.x + 256 * k);
    }
    // U tiles a round: each thread's 4 U loads are issued before the barrier (one tile's 4 kept too few
    // bytes in flight); a round's tiles are g, g + rounds, ... (the same count for every block's tiles,
    // so the barriers are uniform: a tile past the end is skipped by every thread alike).
    const long long tiles = total >> 10;
    const long long rounds = (tiles + U - 1) / U;
    for (long long g = blockIdx.x; g < rounds; g += gridDim.x) {
        long long from[U], to[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long t = g + u * rounds;
            from[u] = 0, to[u] = 0;
#pragma unroll
            for (int c = 0; c < CHUNKS; ++c) {
                const int piece = (int)((t >> (5 * c)) & 31);
                from[u] += base_src[c][piece];
                to[u] += base_out[c][piece];
            }
        }
#pragma unroll
        for (int q = 0; q < PARTS; ++q) {
            if (q >= parts) break;
            W v[U][4];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (g + u * rounds >= tiles) break;
                const W *s = src[q] + from[u];
#pragma unroll
                for (int k = 0; k < 4; ++k) v[u][k] = s[from_k[k]];
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (g + u * rounds >= tiles) break;
#pragma unroll
                for (int k = 0; k < 4; ++k) tile[u][fill_k[k]] = v[u][k];
            }
            __syncthreads();
            W *d = dst + q * total;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (g + u * rounds >= tiles) break;
#pragma unroll
                for (int k = 0; k < 4; ++k) d[to[u] + to_k[k]] = tile[u][read_k[k]];
            }
            __syncthreads();
        }
    }
}
"""


def kernel_name(itemsize: int, parts: bool = False, tiled: bool = False) -> str:
    if tiled:
        return f"permute_tiled_{itemsize}"
    return f"permute_bits_parts_{itemsize}" if parts else f"permute_bits_{itemsize}"


class Rounds(NamedTuple):
    """How many entries a thread of the plain kernels moves a round (``plain``) and how many tiles a block
    of the tiled kernel moves a round (``tiles``, 2^10 entries each, by item size), their loads all issued
    before their stores: more bytes in flight for the same threads."""

    plain: int
    tiles: dict[int, int]


# Measured side by side on an H200 (benchmarks/permute_bench.py, session 75, call 2): a plain copy of 2^28
# float32 entries 647 GB/s before (a bit at a time), 2125 with tables and one entry a round, 2872 with 4,
# 2975 with 8; tiled copies of 2^28 float32 entries 1920-2345 GB/s one tile a round, 2108-2526 with 4,
# 2327-2730 with 8 (32 KiB of shared memory a block, as 4 tiles of 8-byte entries take).
ROUNDS = Rounds(plain=8, tiles={2: 8, 4: 8, 8: 4})
ONE_BY_ONE = Rounds(plain=1, tiles={2: 1, 4: 1, 8: 1})  # an entry or a tile at a time (benchmarks/permute_bench.py)


def make_family(
    cache: KernelCache | None = None, rounds: Rounds = ROUNDS, family_name: str = "tn_permute"
) -> KernelFamily:
    """The copies' kernels; other ``rounds`` (under a ``family_name`` of their own) for a benchmark."""
    fam = KernelFamily(family_name, PREAMBLE, cache=cache)
    strides = ", ".join(f"long long s{b}" for b in range(BITS_MAX))
    near = ", ".join(f"long long n{i}" for i in range(TILE_BITS))
    for itemsize, word in WORDS.items():
        srcs = ", ".join(f"const {word} *src{q}" for q in range(PARTS_MAX))
        placed = "int low, long long extent, long long wide"
        for name, params, call, signature, parts, tiled in (
            (
                kernel_name(itemsize),
                f"const {word} *src, {word} *dst, long long total, int bits, {placed}, {strides}",
                f"lk_permute_bits<{word}, {BITS_MAX}, {rounds.plain}>(src, dst, total, bits, low, extent, wide, "
                "stride)",
                SIGNATURE,
                False,
                False,
            ),
            (
                kernel_name(itemsize, parts=True),
                f"{srcs}, {word} *dst, long long total, int parts, int bits, {placed}, {strides}",
                f"lk_permute_bits_parts<{word}, {BITS_MAX}, {PARTS_MAX}, {rounds.plain}>(src, dst, total, parts, bits, "
                "low, extent, wide, stride)",
                PARTS_SIGNATURE,
                True,
                False,
            ),
            (
                kernel_name(itemsize, tiled=True),
                f"{srcs}, {word} *dst, long long total, int parts, int bits, {strides}, {near}, long long ranks, "
                "long long outs, long long mask",
                f"lk_permute_tiled<{word}, {BITS_MAX}, {PARTS_MAX}, {rounds.tiles[itemsize]}>(src, dst, total, parts, "
                "bits, stride, near, ranks, outs, mask)",
                TILED_SIGNATURE,
                True,
                True,
            ),
        ):
            fam.add(name, _entry(name, word, params, call, parts, tiled), signature=signature)
    return fam


def _entry(name: str, word: str, params: str, call: str, parts: bool, tiled: bool) -> str:
    """A kernel's source: its parameters gathered into the arrays ``call`` reads (``stride``; ``src`` for
    ``parts``, ``near`` for ``tiled``)."""
    arrays = [f"const long long stride[{BITS_MAX}] = {{{', '.join(f's{b}' for b in range(BITS_MAX))}}};"]
    if parts:
        arrays.append(f"const {word} *const src[{PARTS_MAX}] = {{{', '.join(f'src{q}' for q in range(PARTS_MAX))}}};")
    if tiled:
        arrays.append(f"const long long near[{TILE_BITS}] = {{{', '.join(f'n{i}' for i in range(TILE_BITS))}}};")
    body = "".join(f"    {line}\n" for line in [*arrays, f"{call};"])
    return f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}({params}) {{\n{body}}}\n'


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
    ``x`` is not of that kind (two axes of sizes other than 1 or 2, an item size other than 2, 4 or 8)."""
    shape = tuple(int(n) for n in x.shape)
    itemsize = be.dtype(x).itemsize
    if be.dtype(x) == np.complex128 and be.name != "torch":
        return _copy_pairs(be, x, shape)
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
    where, stream = _arrays.device_and_stream(out, "out")
    device = _device.resolve_or_current(_device.common([("x", be.device_of(x)), ("out", where)]))
    with _device.on(device):
        _launch(stream or 0, device, itemsize, [be.pointer(x)], [be.pointer(out)], bits, wide)
    return out


def _copy_pairs(be: Any, x: Any, shape: tuple[int, ...]) -> Any | None:
    """:func:`copy` of 16-byte items (the 128-bit counts, :mod:`.counts.wide`, held as complex128) as two
    8-byte words each: a view with one more axis of 2 (the words), copied by the kernel, read back as
    items. CuPy's own copy compiled a kernel per rank the first time a machine ran one: 20 of them, 3 s of
    a 100-vertex CountingAll (H200, session 81)."""
    if not x.size:
        return None
    words = be.xp.lib.stride_tricks.as_strided(x.real.view(np.uint64), (*shape, 2), (*x.strides, 8))
    out = copy(be, words)
    return None if out is None else out.view(np.complex128).reshape(shape)


def copy_parts(be: Any, parts: tuple[Any, ...], alike: bool = False) -> tuple[Any, ...] | None:
    """C-contiguous copies of GPU arrays of one shape and one set of strides (an algebra's parts), each
    dtype's by one launch into one allocation (:meth:`Backend.empty_parts`: the copies are views of it);
    None when they have two axes of sizes other than 1 or 2, an item size other than 2, 4 or 8, or differ in
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
    where, stream = _arrays.device_and_stream(out[0], "out")  # once for every part
    device = _device.resolve_or_current(_device.common([("x", be.device_of(x)), ("out", where)]))
    runs: dict[np.dtype, list[int]] = {}
    for i, d in enumerate(dtypes):
        runs.setdefault(d, []).append(i)
    with _device.on(device):
        for d, at in runs.items():
            # empty_parts lays one dtype's parts out back to back: a chunk's first is their base
            srcs, dsts = [be.pointer(parts[i]) for i in at], [be.pointer(out[i]) for i in at]
            _launch(stream or 0, device, d.itemsize, srcs, dsts, bits, wide)
    return out


def _launch(
    stream: Any, device: int | None, itemsize: int, srcs: list[int], dsts: list[int], bits: list[int], wide: Wide
) -> None:
    """Copy the arrays at ``srcs`` (one item size, one layout) to ``dsts``, laid out back to back: the
    tiled kernel where the plain one's reads would not coalesce, else the plain one (a single array) or
    the parts kernel, ``PARTS_MAX`` arrays a launch."""
    total = wide.extent << len(bits)
    tile = tiling(bits) if wide.extent == 1 else None
    padded = bits + [0] * (BITS_MAX - len(bits))
    placed = (np.int32(wide.low), wide.extent, wide.stride)
    for start in range(0, len(srcs), PARTS_MAX):
        chunk = srcs[start : start + PARTS_MAX]
        count, filled = np.int32(len(chunk)), chunk + [chunk[0]] * (PARTS_MAX - len(chunk))  # read: the first count
        if tile is not None:
            blocks = min(-(-(total >> TILE_BITS) // ROUNDS.tiles[itemsize]), _MAX_BLOCKS)
            kernel = _kernel(kernel_name(itemsize, tiled=True), device)
            kernel[(blocks,), (THREADS,), stream](
                *filled, dsts[start], total, count, np.int32(len(bits)), *padded, *tile.arguments()
            )
            continue
        blocks = min(-(-total // (THREADS * ROUNDS.plain)), _MAX_BLOCKS)
        if len(chunk) == 1:  # a dtype of one part (counting's value and count): the single copy's kernel
            kernel = _kernel(kernel_name(itemsize), device)
            kernel[(blocks,), (THREADS,), stream](chunk[0], dsts[start], total, np.int32(len(bits)), *placed, *padded)
            continue
        kernel = _kernel(kernel_name(itemsize, parts=True), device)
        kernel[(blocks,), (THREADS,), stream](*filled, dsts[start], total, count, np.int32(len(bits)), *placed, *padded)


def _host_copy(x: np.ndarray, bits: list[int], wide: Wide, shape: tuple[int, ...]) -> np.ndarray:
    reach = sum(bits) + (wide.extent - 1) * wide.stride + 1
    span = np.lib.stride_tricks.as_strided(x, (reach,), (x.itemsize,), writeable=False)
    tile = tiling(bits) if wide.extent == 1 else None
    if tile is not None:  # the tiled kernel's addressing, as the device route would take it
        return _permute_tile.reference(span, 0, bits, tile).reshape(shape)
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

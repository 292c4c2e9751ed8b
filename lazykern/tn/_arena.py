"""One boundary in one buffer: the energy's (or a count's) bit-addressed steps written over the entries they read.

A boundary sweep's steps read the boundary X and write the next one. The row kernel (:mod:`._strided`)
writes a new array, so a step holds two boundaries: a chimera 8 x 8 x 4 sweep's 2^34 float32 entries
are 64 GiB each, and two do not fit an 80 GB GPU. Here the boundary lives in one buffer of
2^``bits`` entries (the plan's largest intermediate), allocated once: a term held there is a view whose
axes (all of size 2) have strides 2^p, each label owning one bit of the address, the bits no label owns
0. A step (``lk_count_bits`` with no count array: :mod:`._arena_kernels`) gives
each thread one assignment of the labels the step leaves alone (its row): it reads the row's entries
(every summed-out and batch assignment) and writes the results at the same row's addresses, the new
spins taking the summed-out spins' bits first, then bits no label owns. Threads touch disjoint
addresses and each reads before it writes, so a step that grows the boundary, shrinks it or keeps its
size writes over it: the boundary never moves and no second copy is held. The planner prices it with
:func:`lazykern.tn._cost.arena_peak`, which follows the same rules as :class:`Arena`.

A count (:mod:`lazykern.tn.counts`) holds its values and each count array (int64, float64, or one int32
residue per prime) in buffers of their own with the same bits, written by the same step with its count
arrays (``count_arenaKN``: ``lk_count_bits`` with DIRECT, every row read where it lies, no tile), where
its two boundaries at a step do not fit: a 32 x 32 pass of three residues (16 bytes an entry) holds
64 GiB so, 96 GiB otherwise, and an 80 GB GPU then counts in two passes, not three.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ._backend import Backend
from ._strided import ADDRESS_BITS, BATCH_BITS_MAX, BITS_MAX

Label = Hashable
THREADS = 256
_MAX_BLOCKS = 132 * 32
SEMIRINGS = ("maxplus", "minplus")  # the kernel adds values: max-times has no such step
VALUE_DTYPES = (np.dtype("float32"), np.dtype("float64"))


class Arena:
    """The buffers of one run (one per part of a term: values, and each count array of a counting pass;
    allocated at their first use) and whether a live term is held in them.

    Only a run whose every intermediate is its own (an unsliced energy: no slice cache, no
    checkpoint, one thread) uses an arena, so a term read by a step is dead after it: the step that
    reads the held term without writing into the arena frees it (:meth:`consumed`)."""

    def __init__(self, bits: int, resident: frozenset[int] = frozenset()) -> None:
        self.bits = bits
        self.resident = resident  # the plan's steps the arena's rules let into it (_cost.arena_run)
        self.buffers: tuple[Any, ...] = ()
        self.held = False

    @property
    def buffer(self) -> Any:
        """The values' buffer (None before the first use)."""
        return self.buffers[0] if self.buffers else None

    def holds(self, be: Backend, x: Any) -> bool:
        """Whether ``x`` (a term's values) is the term held in the arena (its views start at the buffer's
        first entry)."""
        return self.held and self.buffer is not None and _address(be, x) == _address(be, self.buffer)

    def consumed(self, be: Backend, *read: Any) -> None:
        """A step read ``read`` (arrays the step owned) and wrote elsewhere: the held term is dead."""
        if any(self.holds(be, x) for x in read):
            self.held = False

    def view(self, be: Backend, like: tuple[Any, ...], positions: Sequence[int]) -> tuple[Any, ...]:
        """The arena's entries as arrays (one a part of ``like``) of one axis of 2 per bit of ``positions``
        (allocated at the first call, of ``like``'s dtypes and device). Each buffer is a device allocation
        of its own, outside CuPy's pool (``whole``): a pool keeps a freed buffer and cuts the next run's
        small arrays out of it, which then pin all of it. An 80 GB run of a count's passes found its
        float64 pass's 32 GiB count buffer held so by the next pass's operands, and that pass of three
        residues refused (H200 with 60.6 GiB held by another process, benchmarks/results/s70-h200)."""
        if not self.buffers:
            self.buffers = tuple(be.empty(part, (1 << self.bits,), whole=True) for part in like)
        return tuple(
            be.xp.lib.stride_tricks.as_strided(
                b, shape=(2,) * len(positions), strides=tuple(b.itemsize << p for p in positions)
            )
            for b in self.buffers
        )


def _address(be: Backend, x: Any) -> int:
    """The address of ``x``'s first entry (NumPy's for the GPU route on the host)."""
    return int(x.ctypes.data) if be.xp is np else be.pointer(x)


def capable(semiring: str, dtype: np.dtype, be: Backend, counting: bool = False) -> bool:
    """Whether a contraction (an energy, or a count whose counts ride beside) of ``semiring`` and value
    ``dtype`` on ``be`` can run its steps in an arena: CuPy arrays (or NumPy's GPU route on the host, the
    tests' stand-in), float values (or a count's 16-bit ones, :mod:`.counts.wide`), max-plus or min-plus."""
    values = VALUE_DTYPES + ((np.dtype("int16"),) if counting else ())
    return be.name == "cupy" and semiring in SEMIRINGS and np.dtype(dtype) in values


def positions(be: Backend, x: Any) -> list[int] | None:
    """The address bit of each axis of ``x`` (all of size 2, strides distinct powers of two), or None."""
    if any(int(n) != 2 for n in x.shape):
        return None
    strides = be.strides(x)
    if any(s <= 0 or s & (s - 1) for s in strides) or len(set(strides)) != len(strides):
        return None
    return [s.bit_length() - 1 for s in strides]


def layout(
    x_labels: Sequence[Label],
    x_pos: Sequence[int],
    y_labels: Sequence[Label],
    keep: set[Label],
    bits: int,
    inside: bool,
) -> dict[str, Any] | None:
    """The step X (x) Y over binary labels (Y's all of size 2) with its result in an arena of ``bits``
    address bits, or None when the kernel cannot take it (the limits of
    :func:`lazykern.tn._strided.bits_tile`, which the planner applies). ``inside``: X is the arena's own
    term, and the result goes over it (X's other labels keep their bits, the new spins take the
    summed-out spins' bits, then free ones, lowest first); otherwise the result is laid out from bit 0
    (X's other labels in X's order, the new spins lowest) and X is read where it lies.

    Returns the label groups, the result's labels and bits (``out``, ``out_pos``, highest bit first),
    and the kernel's arguments: ``con``, ``batch_in`` (X's bits), ``batch_out``, ``right_pos`` (the
    result's), ``holes_in`` / ``holes_out`` (every bit below the top that is not a row bit), ``rows``."""
    n = len(x_labels)
    if len(set(x_labels)) != n or len(set(y_labels)) != len(y_labels):
        return None
    con = [x for x in x_labels if x in y_labels and x not in keep]
    batch = [x for x in x_labels if x in y_labels and x in keep]
    right = [x for x in y_labels if x not in x_labels]
    if len(con) > BITS_MAX or len(right) > BITS_MAX or len(batch) > BATCH_BITS_MAX:
        return None
    if any(x not in keep for x in right) or n - len(con) + len(right) > bits or bits > ADDRESS_BITS:
        return None
    at_in = dict(zip(x_labels, x_pos))
    others = sorted((x for x in x_labels if x not in con), key=lambda x: -at_in[x])
    if inside:
        owned = set(x_pos)
        free = [at_in[x] for x in con] + [p for p in range(bits) if p not in owned]
        if len(free) < len(right) or max(x_pos, default=0) >= bits:
            return None
        at_out = {x: at_in[x] for x in others} | dict(zip(right, free))
    else:
        order = others + right
        at_out = {x: len(order) - 1 - a for a, x in enumerate(order)}
    out = sorted(at_out, key=lambda x: -at_out[x])
    left = [x for x in others if x not in batch]
    top_in, top_out = max(x_pos, default=-1) + 1, len(out) and max(at_out.values()) + 1
    return {
        "con_labels": con,
        "batch_labels": batch,
        "right": right,
        "out": out,
        "out_pos": [at_out[x] for x in out],
        "con": [at_in[x] for x in con],
        "batch_in": [at_in[x] for x in batch],
        "batch_out": [at_out[x] for x in batch],
        "right_pos": [at_out[x] for x in right],
        "holes_in": _holes(top_in, {at_in[x] for x in left}),
        "holes_out": _holes(top_out, {at_out[x] for x in left}),
        "rows": 1 << len(left),
    }


def _holes(top: int, rows: set[int]) -> list[int]:
    """The bits below ``top`` that are not row bits: the kernel spreads a row's number over the others."""
    return [p for p in range(top) if p not in rows]


def prefetch(be: Backend, like: Any, semiring: str, tiles: Sequence[tuple[int, int]]) -> list[threading.Thread]:
    """The kernels of the arena's steps ``tiles`` (spins out, spins in) for values like ``like``, built in
    threads at once (:meth:`lazykern.families.family.KernelFamily.prefetch`): the threads, to join."""
    if be.xp is np:  # the GPU route on the host (tests): the reference runs
        return []
    from ..launch import _device
    from . import _arena_kernels

    names = [_arena_kernels.kernel_name(semiring, be.dtype(like), kb, nb) for kb, nb in tiles]
    return _arena_kernels.family().prefetch(names, arch=_device.arch(be.device_of(like) or 0))


def launch(be: Backend, x: Any, y: Any, c: Any, lay: dict[str, Any], semiring: str) -> None:
    """One step: X's values at ``x`` (read where they lie), Y contiguous (batch, con, right), the
    result written at ``c``'s addresses by :func:`layout`'s bits (``c`` may be ``x`` itself)."""
    if be.xp is np:  # the GPU route on the host (tests): the kernel's addressing in NumPy
        reference(x, y, c, lay, semiring)
        return
    from ..launch import _device
    from ..tropical import _arrays
    from . import _arena_kernels

    names = ("Xv", "Yv", "Cv")
    ops = [_arrays.as_operand(a, name) for a, name in zip((x, y, c), names)]
    kb, nb = len(lay["con"]), len(lay["right_pos"])
    name = _arena_kernels.kernel_name(semiring, be.dtype(x), kb, nb)
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip(names, ops)]))
    blocks = max(min(-(-lay["rows"] // THREADS), _MAX_BLOCKS), 1)
    with _device.on(device):
        kernel = _arena_kernels.family().get(name, arch=_device.arch(device))
        kernel[(blocks,), (THREADS,), ops[2].stream or 0](
            be.pointer(x),
            be.pointer(y),
            be.pointer(c),
            lay["rows"],
            len(lay["batch_in"]),
            _mask(lay["holes_in"]),
            _mask(lay["holes_out"]),
            _packed(lay["con"]),
            _packed(lay["batch_in"]),
            _packed(lay["batch_out"]),
            _packed(lay["right_pos"]),
        )


def _packed(positions: Sequence[int]) -> Any:  # np.uint64: 8 bits a position, the first lowest
    return np.uint64(sum(int(p) << (8 * t) for t, p in enumerate(positions)))


def _mask(positions: Sequence[int]) -> Any:  # np.uint64
    return np.uint64(sum(1 << int(p) for p in positions))


def _offsets(positions: Sequence[int]) -> np.ndarray:
    """Where each assignment of some spins lies (C order over them: the first spin the highest bit)."""
    n = len(positions)
    return np.array(
        [sum(1 << p for t, p in enumerate(positions) if (k >> (n - 1 - t)) & 1) for k in range(1 << n)], np.int64
    )


def _spread(r: np.ndarray, holes: Sequence[int]) -> np.ndarray:
    """Each of ``r`` with a zero bit inserted at every position of ``holes``, lowest first."""
    for p in sorted(holes):
        r = ((r >> p) << (p + 1)) | (r & ((1 << p) - 1))
    return r


def flat(a: np.ndarray, entries: int) -> np.ndarray:
    """``entries`` entries from ``a``'s first one, as one axis (its bits' address space: ``a`` may be a
    strided view of an arena, which a reshape would copy)."""
    return np.lib.stride_tricks.as_strided(a, shape=(entries,), strides=(a.itemsize,), writeable=True)


def addresses(lay: dict[str, Any], holes_in: Sequence[int], holes_out: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Where the bit-addressed kernel (``lk_count_bits``) reads X, (batch, rows, K), and writes the result,
    (batch, rows, N), for a step's layout ``lay``: a row's number spread over every bit but ``holes_in`` /
    ``holes_out``, then each batch, summed-out and new assignment at its bits."""
    rows = np.arange(lay["rows"], dtype=np.int64)
    a0 = _spread(rows, holes_in)[None, :, None] + _offsets(lay["batch_in"])[:, None, None]
    c0 = _spread(rows, holes_out)[None, :, None] + _offsets(lay["batch_out"])[:, None, None]
    return a0 + _offsets(lay["con"])[None, None, :], c0 + _offsets(lay["right_pos"])[None, None, :]


def reference(x: np.ndarray, y: np.ndarray, c: np.ndarray, lay: dict[str, Any], semiring: str) -> None:
    """What the kernel computes, on NumPy arrays through its addressing (every result formed before any
    is written: ``c`` may share ``x``'s entries)."""
    from ._reference_einsum import bmm

    batch, K, N = (len(lay[k]) for k in ("batch_in", "con", "right_pos"))
    read, write = addresses(lay, lay["holes_in"], lay["holes_out"])
    values = flat(x, int(read.max()) + 1)[read]
    result = bmm(values, np.ascontiguousarray(y).reshape(1 << batch, 1 << K, 1 << N), semiring, False)
    flat(c, int(write.max()) + 1)[write] = result

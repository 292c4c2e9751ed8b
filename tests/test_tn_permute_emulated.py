"""The bit-permutation kernels' CUDA C++ run on the CPU (tests/_cuda_emulator.py): the tiled kernel's
tables, swizzled slots, tile numbers and barriers, and the plain kernels' rounds of several entries a
thread, give the C-order copy, part by part, whatever the layout and however many entries or tiles a
round moves (the shipped ``ROUNDS``, one at a time, and an odd count that leaves a partial round)."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.tn import _permute, _permute_tile

from . import _cuda_emulator

pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs g++ (C++20) to run the kernel")


ROUNDS = {
    "shipped": _permute.ROUNDS,
    "one": _permute.ONE_BY_ONE,
    "odd": _permute.Rounds(plain=3, tiles={2: 3, 4: 3, 8: 3}),
}
SIGNATURES = {"tiled": _permute.TILED_SIGNATURE, "plain": _permute.SIGNATURE, "parts": _permute.PARTS_SIGNATURE}


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """(rounds, kind, item size) -> the kernel run on the CPU, built on first use."""
    built = {}

    def get(rounds: str, kind: str, size: int):
        key = (rounds, kind, size)
        if key not in built:
            fam = _permute.make_family(rounds=ROUNDS[rounds])  # only its source is read: nothing is compiled
            name = _permute.kernel_name(size, parts=kind == "parts", tiled=kind == "tiled")
            where = tmp_path_factory.mktemp(f"emulated_{rounds}_{kind}_{size}")
            built[key] = _cuda_emulator.Emulated(
                fam.source.translation_unit(name), name, SIGNATURES[kind], _permute.WORDS[size], where
            )
        return built[key]

    return get


@pytest.fixture(scope="module")
def kernels(build):
    return {size: build("shipped", "tiled", size) for size in _permute.WORDS}


_WORD = {2: np.uint16, 4: np.uint32, 8: np.uint64}  # the word each item size moves


def _layout(rng, n: int, kind: str):
    """A view of a binary tensor of n + 1 axes (one picked or reversed away), its base and bit strides."""
    x = rng.integers(0, 2**30, size=(2,) * (n + 1)).astype(np.int64)
    view = {"picked": x[:, 1], "reversed": x[::-1, 0, ::-1], "whole": x[0]}[kind]
    view = view.transpose(tuple(rng.permutation(view.ndim)))
    bits = _permute.bit_strides(view.shape, tuple(s // 8 for s in view.strides))
    offset = (view.__array_interface__["data"][0] - x.__array_interface__["data"][0]) // 8
    return x.reshape(-1), offset, bits


@pytest.mark.parametrize(
    ("n", "size", "parts", "grid", "kind"),
    [
        (10, 4, 1, 1, "whole"),
        (12, 8, 3, 2, "picked"),
        (13, 4, 8, 3, "reversed"),
        (17, 8, 2, 2, "picked"),  # 7 bits number the tiles: two of the tile-number tables
        (11, 8, 1, 5, "whole"),  # more blocks than tiles
        (12, 2, 2, 2, "picked"),  # 2-byte entries (int16 values)
    ],
)
def test_tiled_kernel_copies_each_part_exactly(kernels, n, size, parts, grid, kind):
    _check_tiled(kernels[size], np.random.default_rng(n * 10 + parts), n, size, parts, grid, kind)


@pytest.mark.parametrize("rounds", ["one", "odd"])
@pytest.mark.parametrize(("n", "size", "parts", "grid"), [(12, 4, 1, 1), (13, 8, 3, 2), (11, 4, 2, 3), (12, 2, 1, 2)])
def test_tiled_kernel_copies_exactly_whatever_tiles_a_round_moves(build, rounds, n, size, parts, grid):
    _check_tiled(build(rounds, "tiled", size), np.random.default_rng(n * 100 + size), n, size, parts, grid, "picked")


def _check_tiled(kernel, rng, n: int, size: int, parts: int, grid: int, kind: str) -> None:
    """One tiled copy of ``parts`` arrays of a random layout that takes the tiled kernel, against the reference."""
    flat, offset, bits = _layout(rng, n, kind)
    tile = _permute_tile.tiling(bits)
    while tile is None:
        flat, offset, bits = _layout(rng, n, kind)
        tile = _permute_tile.tiling(bits)
    words = np.concatenate([flat + q * 7919 for q in range(parts)]).astype(_WORD[size])
    total = 1 << len(bits)
    srcs = [("src", q * flat.size + offset) for q in range(parts)]
    srcs += [srcs[0]] * (_permute.PARTS_MAX - parts)
    padded = bits + [0] * (_permute.BITS_MAX - len(bits))
    args = [*srcs, "out", total, parts, len(bits), *padded, *tile.arguments()]
    got = kernel(grid, _permute.THREADS, words, parts * total, args).reshape(parts, total)
    for q in range(parts):
        assert np.array_equal(got[q], _permute.reference(words[q * flat.size : (q + 1) * flat.size], offset, bits)), q


@pytest.mark.parametrize("rounds", ["shipped", "one", "odd"])
@pytest.mark.parametrize(
    ("n", "size", "parts", "grid", "threads", "wide"),
    [
        (9, 4, 1, 1, 32, 1),  # 512 entries, 32 threads: whole rounds, then the tail
        (8, 8, 1, 3, 64, 3),  # an axis of 3 among the axes of 2
        (7, 4, 3, 2, 32, 1),
        (6, 8, 5, 1, 64, 5),  # fewer entries than one round of every thread
        (8, 2, 1, 2, 32, 3),  # 2-byte entries
        (7, 2, 3, 1, 64, 1),
    ],
)
def test_plain_kernels_copy_exactly_whatever_entries_a_round_moves(build, rounds, n, size, parts, grid, threads, wide):
    rng = np.random.default_rng(n * 10 + parts + wide)
    shape = (2,) * n + ((wide,) if wide > 1 else ())
    x = rng.integers(0, 2**30, size=shape).astype(np.int64)
    view = x.transpose(tuple(rng.permutation(x.ndim)))
    found = _permute.layout(view.shape, tuple(st // 8 for st in view.strides))
    assert found is not None
    bits, placed = found
    flat = x.reshape(-1)
    words = np.concatenate([flat + q * 7919 for q in range(parts)]).astype(_WORD[size])
    total = placed.extent << len(bits)
    padded = bits + [0] * (_permute.BITS_MAX - len(bits))
    where = [len(bits), placed.low, placed.extent, placed.stride]
    if parts == 1:
        args = [("src", 0), "out", total, *where, *padded]
        got = build(rounds, "plain", size)(grid, threads, words, total, args).reshape(1, total)
    else:
        srcs = [("src", q * flat.size) for q in range(parts)] + [("src", 0)] * (_permute.PARTS_MAX - parts)
        args = [*srcs, "out", total, parts, *where, *padded]
        got = build(rounds, "parts", size)(grid, threads, words, parts * total, args).reshape(parts, total)
    for q in range(parts):
        want = np.ascontiguousarray(view).reshape(-1) + q * 7919
        assert np.array_equal(got[q], want.astype(words.dtype)), q

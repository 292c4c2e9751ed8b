"""The tiled bit-permutation kernel's CUDA C++ run on the CPU (tests/_cuda_emulator.py): its tables,
swizzled slots, tile numbers and barriers give the C-order copy, part by part, whatever the layout."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.tn import _permute, _permute_tile

from . import _cuda_emulator

pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs g++ (C++20) to run the kernel")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    fam = _permute.make_family()  # only its source is read: nothing is compiled or stored
    where = tmp_path_factory.mktemp("emulated")
    out = {}
    for size, word in _permute.WORDS.items():
        name = _permute.kernel_name(size, tiled=True)
        out[size] = _cuda_emulator.Emulated(
            fam.source.translation_unit(name), name, _permute.TILED_SIGNATURE, word, where
        )
    return out


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
    ],
)
def test_tiled_kernel_copies_each_part_exactly(kernels, n, size, parts, grid, kind):
    rng = np.random.default_rng(n * 10 + parts)
    flat, offset, bits = _layout(rng, n, kind)
    tile = _permute_tile.tiling(bits)
    while tile is None:
        flat, offset, bits = _layout(rng, n, kind)
        tile = _permute_tile.tiling(bits)
    words = np.concatenate([flat + q * 7919 for q in range(parts)]).astype(np.uint32 if size == 4 else np.uint64)
    total = 1 << len(bits)
    srcs = [("src", q * flat.size + offset) for q in range(parts)]
    srcs += [srcs[0]] * (_permute.PARTS_MAX - parts)
    padded = bits + [0] * (_permute.BITS_MAX - len(bits))
    args = [*srcs, "out", total, parts, len(bits), *padded, *tile.arguments()]
    got = kernels[size](grid, _permute.THREADS, words, parts * total, args).reshape(parts, total)
    for q in range(parts):
        want = _permute.reference(words[q * flat.size : (q + 1) * flat.size], offset, bits)
        assert np.array_equal(got[q], want), q

"""The bit-permutation copy of binary tensors (lazykern/tn/_permute.py) and the layout rule that calls it."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.tn import _contract, _permute, _permute_tile
from lazykern.tn._backend import Backend


def _views(rng: np.random.Generator, dtype: str) -> list[np.ndarray]:
    """Permuted views of binary tensors, some with an axis fixed (a select) or of size 1."""
    out = []
    for n in (1, 3, 7, 12):
        x = rng.integers(-(2**20), 2**20, size=(2,) * n).astype(dtype)
        out.append(x.transpose(rng.permutation(n)))
        if n > 2:
            y = x[(slice(None),) * (n // 2) + (1,)]  # a fixed label: an offset and strides of a larger tensor
            out.append(y.transpose(rng.permutation(y.ndim)))
            z = x.reshape((2,) * (n - 1) + (1, 2)).transpose(rng.permutation(n + 1))  # a size-1 axis anywhere
            out.append(z)
    return out


@pytest.mark.parametrize("dtype", ["int16", "float32", "int32", "float64", "int64"])
def test_bit_permutation_reads_what_a_contiguous_copy_holds(dtype):
    rng = np.random.default_rng(7)
    for view in _views(rng, dtype):
        item = view.itemsize
        bits = _permute.bit_strides(view.shape, tuple(s // item for s in view.strides))
        assert bits is not None and len(bits) == sum(n == 2 for n in view.shape)
        base = view.base if view.base is not None else view
        while base.base is not None:
            base = base.base
        offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
        got = _permute.reference(base.reshape(-1), offset, bits)
        assert got.dtype == view.dtype
        assert np.array_equal(got, np.ascontiguousarray(view).reshape(-1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_wide_axis_reads_what_a_contiguous_copy_holds(dtype):
    """Binary tensors with one axis of another extent (a polynomial's points, anywhere, also after a
    select) copied by the kernel's addressing: the same entries as NumPy's contiguous copy."""
    rng = np.random.default_rng(9)
    for extent in (3, 68, 1088):
        for n in (1, 4, 9):
            x = rng.integers(0, 2**20, size=(extent,) + (2,) * n).astype(dtype)
            views = [x.transpose(rng.permutation(n + 1)), x[:, 1].transpose(rng.permutation(n)) if n > 1 else x]
            for view in views:
                found = _permute.layout(view.shape, tuple(s // view.itemsize for s in view.strides))
                assert found is not None
                bits, wide = found
                assert wide.extent == extent and len(bits) == sum(k == 2 for k in view.shape)
                offset = (view.__array_interface__["data"][0] - x.__array_interface__["data"][0]) // x.itemsize
                got = _permute.reference(x.reshape(-1), offset, bits, wide)
                assert np.array_equal(got, np.ascontiguousarray(view).reshape(-1))
    assert _permute.layout((3, 2, 5), (10, 5, 1)) is None
    assert _permute.layout((2, 2), (2, 1)) == ([1, 2], _permute.NARROW)


def test_parts_with_a_wide_axis_copied_at_once_on_the_host_stand_in(monkeypatch):
    """A polynomial operand's residue parts (an axis of points) copied by one launch into one block."""
    monkeypatch.setattr(_permute, "copy", lambda *a: pytest.fail("a part copied on its own"))
    rng = np.random.default_rng(13)
    be = Backend("cupy", np)
    block = rng.integers(0, 2**20, size=(3, 68) + (2,) * 7).astype(np.float64)
    perm = tuple(rng.permutation(8))
    parts = tuple(p.transpose(perm) for p in block)
    out = be.contiguous_parts(parts)
    for got, want in zip(out, parts):
        assert got.flags.c_contiguous and np.array_equal(got, want)
    assert out[0].base is out[2].base


def test_bit_strides_refuse_other_axes():
    assert _permute.bit_strides((2, 3), (3, 1)) is None
    assert _permute.bit_strides((2,) * (_permute.BITS_MAX + 1), (1,) * (_permute.BITS_MAX + 1)) is None
    assert _permute.bit_strides((2, 1, 2), (1, 7, 2)) == [2, 1]  # bit 0 is the last axis of 2


def test_permute_kernels_are_lazy_and_compile_for_sm90(cache):
    fam = _permute.make_family(cache)
    names = [f"permute_{kind}_{size}" for kind in ("bits", "bits_parts", "tiled") for size in (2, 4, 8)]
    assert sorted(fam.names()) == names and fam.compiled() == []
    assert [k.name for k in fam.warm(["permute_bits_4"], arch="sm_90")] == ["permute_bits_4"]
    assert fam.compiled() == ["permute_bits_4"]
    assert [k.name for k in fam.warm(["permute_bits_parts_8"], arch="sm_90")] == ["permute_bits_parts_8"]
    assert sorted(fam.compiled()) == ["permute_bits_4", "permute_bits_parts_8"]
    tiled = ["permute_tiled_2", "permute_tiled_4", "permute_tiled_8"]
    assert sorted(k.name for k in fam.warm(tiled, arch="sm_80")) == tiled


def test_merges_says_when_a_reshape_is_a_view():
    x = np.zeros((2, 3, 4, 5))
    assert _contract.merges(x.shape, tuple(s // 8 for s in x.strides), [2, 2])
    t = x.transpose(0, 2, 1, 3)
    strides = tuple(s // 8 for s in t.strides)
    assert not _contract.merges(t.shape, strides, [2, 2])  # 4 and 3 swapped: a copy
    assert _contract.merges(t.shape, strides, [1, 1, 1, 1])
    assert _contract.merges((2, 1, 3), (3, 99, 1), [3])  # a size-1 axis strides anyhow


def test_host_contiguous_is_numpys():
    be = Backend("numpy", np)
    x = np.arange(16.0).reshape((2,) * 4).transpose(3, 1, 0, 2)
    y = be.contiguous(x)
    assert y.flags.c_contiguous and np.array_equal(y, x)
    assert be.contiguous(y) is y


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int16", "float32", "int64"])
def test_gpu_copy_is_the_bit_kernel_and_exact(dtype):
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(3)
    be = Backend("cupy", cupy)
    for n in (3, 7, 12, 20):
        x = rng.integers(-(2**20), 2**20, size=(2,) * n).astype(dtype)
        X = cupy.asarray(x)
        pick = (slice(None),) * (n // 2) + (1,)
        for host, dev in ((x, X), (x[pick], X[pick])):
            perm = tuple(rng.permutation(host.ndim))
            out = be.contiguous(dev.transpose(perm))
            assert out.flags.c_contiguous and np.array_equal(
                cupy.asnumpy(out), np.ascontiguousarray(host.transpose(perm))
            )
    assert f"permute_bits_{np.dtype(dtype).itemsize}" in _permute.family().compiled()


@pytest.mark.gpu
def test_gpu_copy_with_a_wide_axis_is_the_bit_kernel_and_exact():
    """A polynomial operand (an axis of 68 points, binary axes permuted), alone and as 3 residue parts."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(4)
    be = Backend("cupy", cupy)
    host = rng.integers(0, 2**20, size=(3, 68) + (2,) * 12).astype(np.float64)
    dev = cupy.asarray(host)
    perm = tuple(rng.permutation(13))
    out = be.contiguous(dev[1].transpose(perm))
    assert out.flags.c_contiguous and np.array_equal(cupy.asnumpy(out), np.ascontiguousarray(host[1].transpose(perm)))
    parts = be.contiguous_parts(tuple(dev[i].transpose(perm) for i in range(3)))
    for i, got in enumerate(parts):
        assert np.array_equal(cupy.asnumpy(got), np.ascontiguousarray(host[i].transpose(perm)))
    assert "permute_bits_parts_8" in _permute.family().compiled()


def test_device_route_on_the_host_copies_by_the_kernels_addressing(monkeypatch):
    """A GPU backend over NumPy arrays (the device route's host stand-in) copies binary tensors through
    the kernel's reference; other shapes go to the library's copy."""
    calls = []
    real = _permute.reference
    monkeypatch.setattr(_permute, "reference", lambda *a: calls.append(a[2]) or real(*a))
    be = Backend("cupy", np)
    x = np.arange(2.0**9).reshape((2,) * 9)[:, 1].transpose(3, 0, 6, 1, 2, 7, 4, 5)
    y = be.contiguous(x)
    assert y.flags.c_contiguous and np.array_equal(y, np.ascontiguousarray(x)) and len(calls) == 1
    z = np.arange(12.0).reshape(3, 4).T
    assert np.array_equal(be.contiguous(z), np.ascontiguousarray(z)) and len(calls) == 1


def _pairs(rng: np.random.Generator, n: int) -> np.ndarray:
    """16-byte items (128-bit counts as complex128) of a binary tensor of ``n`` axes and one of 5: every bit
    pattern, NaN payloads and all-ones words among them."""
    words = rng.integers(0, 2**64, size=(2,) * n + (5, 2), dtype=np.uint64)
    words.reshape(-1)[:4] = np.iinfo(np.uint64).max
    return words.view(np.complex128)[..., 0]


def test_sixteen_byte_items_are_copied_as_two_words_each_bit_for_bit(monkeypatch):
    """The device route's host stand-in copies 128-bit counts through the kernel's addressing on two words
    an item (a wide axis, binary axes permuted, a select): every bit kept, no library copy."""
    calls = []
    real = _permute.reference
    monkeypatch.setattr(_permute, "reference", lambda *a: calls.append(a[2]) or real(*a))
    be = Backend("cupy", np)
    rng = np.random.default_rng(9)
    x = _pairs(rng, 6)
    for view in (x.transpose(3, 6, 0, 5, 1, 2, 4), x[:, 1].transpose(2, 5, 0, 4, 1, 3)):
        out = be.contiguous(view)
        want = np.ascontiguousarray(view)
        assert out.flags.c_contiguous and out.dtype == np.complex128 and out.shape == want.shape
        assert np.array_equal(out.view(np.uint64), want.view(np.uint64))
    assert len(calls) == 2
    assert _permute.copy(be, np.zeros((2, 0, 2), np.complex128).transpose(2, 1, 0)) is None  # nothing to copy


@pytest.mark.gpu
def test_gpu_sixteen_byte_items_are_the_bit_kernels_two_words():
    cupy = pytest.importorskip("cupy")
    be = Backend("cupy", cupy)
    x = _pairs(np.random.default_rng(10), 9)
    perm = (4, 9, 0, 8, 1, 2, 7, 3, 6, 5)
    out = be.contiguous(cupy.asarray(x).transpose(perm))
    want = np.ascontiguousarray(x.transpose(perm))
    assert out.flags.c_contiguous and np.array_equal(cupy.asnumpy(out).view(np.uint64), want.view(np.uint64))
    assert "permute_bits_8" in _permute.family().compiled()


def _parts(rng: np.random.Generator, n: int, perm: tuple[int, ...], dtypes: list[str]) -> tuple[np.ndarray, ...]:
    """Permuted views of binary tensors of one shape and element strides, one of each dtype."""
    return tuple(rng.integers(-(2**20), 2**20, size=(2,) * n).astype(d).transpose(perm) for d in dtypes)


def test_parts_copied_at_once_on_the_host_stand_in(monkeypatch):
    """An operand's parts (2 float32 values, 4 int64 counts) copied by one launch per dtype into one
    allocation per dtype: the copies are exact, C-contiguous, and each dtype's are views of one block."""
    launched = []
    real = _permute.copy_parts
    monkeypatch.setattr(_permute, "copy_parts", lambda *a: launched.append(a[1]) or real(*a))
    monkeypatch.setattr(_permute, "copy", lambda *a: pytest.fail("a part copied on its own"))
    rng = np.random.default_rng(11)
    be = Backend("cupy", np)
    parts = _parts(rng, 9, tuple(rng.permutation(9)), ["float32"] * 2 + ["int64"] * 4)
    out = be.contiguous_parts(parts)
    assert len(launched) == 1
    for got, want in zip(out, parts):
        assert got.flags.c_contiguous and got.dtype == want.dtype and np.array_equal(got, want)
    assert out[0].base is out[1].base and out[0].base.shape == (2, *out[0].shape)
    assert out[2].base is out[5].base and out[2].base.shape == (4, *out[2].shape) and out[2].base is not out[0].base


def test_parts_of_other_strides_or_shapes_are_copied_one_by_one():
    rng = np.random.default_rng(12)
    be = Backend("cupy", np)
    a, b = _parts(rng, 6, (5, 0, 3, 1, 4, 2), ["float32", "int64"])
    c = rng.integers(0, 9, size=(2,) * 6).astype(np.int64).transpose(1, 0, 2, 3, 5, 4)  # other strides
    assert _permute.copy_parts(be, (a, b, c)) is None
    out = be.contiguous_parts((a, b, c))
    assert all(np.array_equal(x, y) and x.flags.c_contiguous for x, y in zip(out, (a, b, c)))
    odd = np.zeros((3, 5)).T  # two axes of other sizes: the library's copy
    assert _permute.copy_parts(be, (odd, odd)) is None
    assert all(x.flags.c_contiguous for x in be.contiguous_parts((odd, odd)))
    done = np.zeros((2, 2, 2))
    assert be.contiguous_parts((done, done))[1] is done  # already contiguous: no copy


def test_empty_parts_share_one_allocation_per_dtype():
    be = Backend("cupy", np)
    likes = [np.zeros(1, np.float32), np.zeros(1, np.int64), np.zeros(1, np.float32), np.zeros(1, np.float64)]
    out = be.empty_parts(likes, (2, 3))
    assert [o.dtype for o in out] == [x.dtype for x in likes] and all(o.shape == (2, 3) for o in out)
    assert out[0].base is out[2].base and out[0].base.shape == (2, 2, 3)
    assert out[1].base is None and out[3].base is None  # a dtype of one part: its own array
    assert not np.shares_memory(out[0], out[2])  # disjoint parts of the block


def test_kernel_lookup_is_one_dict_hit_per_device(monkeypatch):
    """The step path asks the family once per (kernel, device), then reuses the loaded kernel; a new
    family (a test's, a reset) forgets them."""
    from lazykern.launch import _device

    asked = []

    class Family:
        def get(self, name, arch=None):
            asked.append((name, arch))
            return (name, arch)

    monkeypatch.setattr(_permute, "_family", Family())
    monkeypatch.setattr(_permute, "_kernels", {})
    monkeypatch.setattr(_device, "arch", lambda device: f"sm_9{device}")
    assert _permute._kernel("permute_bits_8", 0) == ("permute_bits_8", "sm_90")
    assert _permute._kernel("permute_bits_8", 0) == ("permute_bits_8", "sm_90")
    assert _permute._kernel("permute_bits_8", 1) == ("permute_bits_8", "sm_91")
    assert asked == [("permute_bits_8", "sm_90"), ("permute_bits_8", "sm_91")]
    monkeypatch.setattr(_permute, "_family", None)
    monkeypatch.setattr(_permute, "make_family", Family)
    _permute.family()
    assert _permute._kernels == {}


@pytest.mark.gpu
@pytest.mark.parametrize("tiled", [True, False])
def test_gpu_parts_copy_is_exact_in_chunks(tiled, monkeypatch):
    """More parts than one launch takes (PARTS_MAX), three dtypes (one of a single part: the single
    copy's kernel), a fixed label: each copy exact, each dtype's copies one allocation; through the
    tiled kernel (this layout's reads would not coalesce) and, with tiling off, the plain ones."""
    cupy = pytest.importorskip("cupy")
    if not tiled:
        monkeypatch.setattr(_permute, "tiling", lambda bits: None)
    rng = np.random.default_rng(13)
    be = Backend("cupy", cupy)
    n = 14
    perm = tuple(rng.permutation(n - 1))
    dtypes = ["float32"] * 3 + ["int64"] * (_permute.PARTS_MAX + 3) + ["float64"]  # float64: a run of one
    host = [rng.integers(-(2**20), 2**20, size=(2,) * n).astype(d)[:, 1] for d in dtypes]
    dev = [cupy.asarray(h.base if h.base is not None else h)[:, 1].transpose(perm) for h in host]
    assert _permute_tile.tiling(_permute.bit_strides(dev[0].shape, be.strides(dev[0]))) is not None
    out = be.contiguous_parts(dev)
    for got, h in zip(out, host):
        assert got.flags.c_contiguous and np.array_equal(cupy.asnumpy(got), np.ascontiguousarray(h.transpose(perm)))
    assert out[3].base is out[-2].base
    names = ("permute_tiled_8", "permute_tiled_4") if tiled else ("permute_bits_parts_8", "permute_bits_parts_4")
    assert set(names) <= set(_permute.family().compiled())


def _binary_views(rng: np.random.Generator, n: int):
    """Permuted views of a binary tensor of n axes: whole, with an axis picked, and with axes reversed."""
    x = rng.integers(-(2**20), 2**20, size=(2,) * (n + 1)).astype(np.int64)
    for _ in range(4):
        yield x[0].transpose(tuple(rng.permutation(n))), x
        yield x[:, 1].transpose(tuple(rng.permutation(n))), x
        yield x[::-1, 0, ::-1].transpose(tuple(rng.permutation(n))), x


@pytest.mark.parametrize("n", [10, 11, 14])
def test_tiled_addressing_is_the_transpose(n):
    """The tiled kernel's tables, swizzled slots and tile bases (run in NumPy) give the C-order copy."""
    rng = np.random.default_rng(n)
    tiled = 0
    for view, base in _binary_views(rng, n):
        bits = _permute.bit_strides(view.shape, tuple(s // 8 for s in view.strides))
        tile = _permute_tile.tiling(bits)
        if tile is None:
            continue
        tiled += 1
        offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // 8
        got = _permute_tile.reference(base.reshape(-1), offset, bits, tile)
        assert np.array_equal(got.reshape(view.shape), np.ascontiguousarray(view))
    assert tiled >= 8


def test_tiling_holds_the_output_lowest_and_the_source_nearest_bits():
    rng = np.random.default_rng(21)
    for n in (10, 13, 20):
        bits = [int(s) for s in rng.permutation([1 << i for i in range(n)])]
        tile = _permute_tile.tiling(bits)
        if tile is None:
            assert bits[:5] == [1, 2, 4, 8, 16]
            continue
        nearest = sorted(range(n), key=lambda b: bits[b])[:5]
        assert len(tile.outs) == 10 and list(tile.outs) == sorted(tile.outs)
        assert set(range(5)) | set(nearest) <= set(tile.outs)
        assert tile.mask == sum(1 << b for b in tile.outs)
        assert list(tile.strides) == sorted(bits[b] for b in tile.outs)  # source order: nearest first
        assert [tile.outs[r] for r in tile.ranks] == [bits.index(s) for s in tile.strides]
        ranks, outs = tile.packed()
        assert [(ranks >> (4 * i)) & 15 for i in range(10)] == list(tile.ranks)
        assert [(outs >> (6 * i)) & 63 for i in range(10)] == list(tile.outs)
    assert _permute_tile.tiling([1 << i for i in range(12)]) is None  # reads coalesce already
    assert _permute_tile.tiling([1 << i for i in range(9)][::-1]) is None  # under 2^10 entries: the plain copy


def test_device_route_on_the_host_copies_through_the_tiled_addressing(monkeypatch):
    calls = []
    real = _permute_tile.reference
    monkeypatch.setattr(_permute_tile, "reference", lambda *a: calls.append(a[2]) or real(*a))
    be = Backend("cupy", np)
    rng = np.random.default_rng(22)
    parts = _parts(rng, 12, tuple(range(12))[::-1], ["float32"] * 3 + ["int64"] * 9)
    out = be.contiguous_parts(parts)
    assert len(calls) == 12 and all(np.array_equal(a, b) and a.flags.c_contiguous for a, b in zip(out, parts))
    x = parts[0]
    assert np.array_equal(be.contiguous(x), x) and len(calls) == 13


@pytest.mark.gpu
def test_gpu_tiled_copy_is_exact_for_parts_past_one_launch():
    """12 parts (3 float32, 9 int64: two launches of int64) of a permuted 2^14 binary tensor, and a single
    array: through the tiled kernel, each exact."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(23)
    be = Backend("cupy", cupy)
    bases = [rng.integers(-(2**20), 2**20, size=(2,) * 14).astype(d) for d in ["float32"] * 3 + ["int64"] * 9]
    perm = tuple(int(a) for a in rng.permutation(14))
    while _permute_tile.tiling([1 << (13 - a) for a in perm][::-1]) is None:
        perm = tuple(int(a) for a in rng.permutation(14))
    dev = tuple(cupy.asarray(b).transpose(perm) for b in bases)
    out = be.contiguous_parts(dev)
    for got, want in zip(out, bases):
        assert got.flags.c_contiguous and np.array_equal(cupy.asnumpy(got), want.transpose(perm))
    assert np.array_equal(cupy.asnumpy(be.contiguous(dev[4])), bases[4].transpose(perm))
    assert {"permute_tiled_4", "permute_tiled_8"} <= set(_permute.family().compiled())


def test_device_and_stream_reads_a_cupy_like_array_cheaply(monkeypatch):
    """A CuPy-typed array: its device from ``data.device_id`` and CuPy's current stream there, without
    the CUDA Array Interface (a permute or k-best step asks this per launch)."""
    from lazykern.tropical import _arrays

    fake = type("ndarray", (), {"__module__": "cupy._core.core"})
    x = fake()
    x.shape, x.strides, x.dtype = (2, 2), (8, 4), np.dtype("float32")
    x.data = type("MemoryPointer", (), {})()
    x.data.device_id, x.data.ptr = 1, 4096
    streams = {1: 777}
    monkeypatch.setattr(_arrays, "_cupy_get_stream", lambda: lambda device: type("S", (), {"ptr": streams[device]}))
    assert _arrays.device_and_stream(x, "out") == (1, 777)
    streams[1] = 778  # the current stream is read per call
    assert _arrays.device_and_stream(x, "out") == (1, 778)


@pytest.mark.gpu
@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_device_and_stream_is_what_as_operand_says(module):
    """On a non-default stream: the fast reading agrees with :func:`as_operand`'s device and stream."""
    lib = pytest.importorskip(module)
    from lazykern.tropical import _arrays

    if module == "cupy":
        x = lib.zeros((4, 4), dtype=lib.float32)
        with lib.cuda.Stream() as s:
            op = _arrays.as_operand(x, "out")
            assert _arrays.device_and_stream(x, "out") == (op.device, op.stream) and op.stream == s.ptr
    else:
        x = lib.zeros((4, 4), device="cuda")
        s = lib.cuda.Stream()
        with lib.cuda.stream(s):
            op = _arrays.as_operand(x, "out")
            assert _arrays.device_and_stream(x, "out") == (op.device, op.stream) and op.stream == s.cuda_stream

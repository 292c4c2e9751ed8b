"""The planner on the CPU: shape classes, split-K, grids and backward plans for several SM counts."""

from __future__ import annotations

import functools

import pytest

from lazykern.tropical import fragments, plan

H100 = 132
SM_COUNTS = [132, 108, 16, 170]  # H100 / H200, A100, a small part, a larger future one


@pytest.mark.parametrize(
    "dtype, argmax, batch, M, N, K, tile",
    [
        ("f32", False, 1, 2**21, 4, 4, "r4"),  # K, N <= 4: the 40-register row kernel
        ("f32", True, 2**21, 4, 4, 4, "r4"),
        ("f64", False, 1, 1000, 4, 5, "r"),  # K = 5: KMAX 8
        ("i32", False, 1, 1000, 8, 3, "r"),
        ("f32", False, 1, 1000, 9, 3, "t"),  # N = 9: past the row kernels
        ("f32", False, 1, 64, 64, 4096, "splitk"),  # one 64x64 tile, long K
        ("f32", False, 1, 256, 256, 256, "splitk"),  # 16 tiles
        ("i64", True, 1, 4096, 16, 1024, "splitk"),  # tall but few tiles: split beats one "t" block per 128 rows
        ("f32", False, 4, 128, 128, 1024, "splitk"),  # 16 tiles over the batch
        ("f32", False, 1, 64, 64, 127, "s"),  # K too short for two slices of 64
        ("f32", False, 128, 64, 64, 64, "s"),  # too few 64x64 blocks to fill the GPU: the small tile
        ("f32", False, 1024, 64, 64, 64, "m"),  # batch fills the GPU: the 64x64 tile over the whole K
        ("f32", True, 1024, 64, 64, 64, ""),  # argmax keeps its own tiles
        ("f32", False, 100, 128, 128, 1024, ""),  # 400 split tiles: enough blocks without splitting
        ("f32", False, 1, 4096, 4096, 64, ""),
        ("f32", False, 1, 2048, 2048, 8192, ""),
        ("f32", False, 1, 2**21, 16, 16, "t"),
    ],
)
def test_shape_classes_with_k(dtype, argmax, batch, M, N, K, tile):
    assert plan.choose_tile(dtype, argmax, batch, M, N, K, sms=H100) == tile


@pytest.mark.parametrize(
    "batch, M, N, K", [(1, 64, 64, 4096), (1, 256, 256, 256), (1, 8, 8, 100_001), (3, 100, 70, 999), (1, 1, 1, 130)]
)
@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("sms", SM_COUNTS)
def test_split_k_slices_cover_k_exactly(batch, M, N, K, argmax, sms):
    splits, kslice = plan.split_k("f32", argmax, batch, M, N, K, sms=sms)
    bk = fragments.tile_shape("splitk", "f32", argmax).bk
    assert kslice % bk == 0 and kslice >= plan.SPLIT_MIN_K // 2
    assert (splits - 1) * kslice < K <= splits * kslice  # no empty slice, nothing left over
    blocks = batch * -(-M // 64) * -(-N // 64) * splits
    assert blocks <= 2 * plan.split_target_blocks(sms)  # about 4 blocks per SM, not thousands


def test_plans_for_split_k_and_rows():
    p = plan.make_plan("maxplus", "f32", True, "nt", 1, 64, 64, 4096, False, sms=H100)
    assert p.kind == "splitk" and p.name == "maxplus_f32_argmax_nt_splitk"
    assert p.reduce == "reduce_maxplus_f32_argmax"
    assert p.grid == (1, p.splits) and p.splits * p.kslice >= 4096
    p = plan.make_plan("minplus", "i32", False, "nn", 5, 60, 70, 1000, True, sms=H100)  # bmm: the same kernel
    assert p.name == "minplus_i32_splitk" and p.grid == (2, 5 * p.splits)
    assert plan.make_plan("maxplus", "f32", False, "tt", 1, 2**21, 4, 4, False, sms=H100).name == "maxplus_f32_r4"
    assert plan.make_plan("maxplus", "f32", False, "nn", 1, 1000, 8, 8, False, sms=H100).name == "maxplus_f32_r"


def test_forced_tiles_fall_back_where_they_cannot_run():
    assert plan.make_plan("maxplus", "f32", False, "nn", 1, 5, 4, 0, False, sms=H100, tile="splitk").kind == "gemm"
    with pytest.raises(ValueError, match="K, N <= 4"):
        plan.make_plan("maxplus", "f32", False, "nn", 1, 5, 4, 5, False, sms=H100, tile="r4")


def test_backward_plan_picks_shared_memory_or_atomics():
    backward_plan = functools.partial(plan.backward_plan, sms=H100)

    # grad_A: a block per row and K chunk of 8192 (f32) / 4096 (f64), stored once: no zeroing
    assert backward_plan("a", 4, 1, 4096, 4096, 4096, False) == (1, 4096, False)
    assert backward_plan("a", 8, 1, 1024, 4096, 9000, False) == (1, 1024 * 3, False)
    # few rows: each row split into column groups, added atomically into zeroed memory
    assert backward_plan("a", 8, 1, 64, 4096, 9000, False) == (3, 64 * 3 * 3, True)
    # grad_B: strips of 8 columns x K chunks of 1024 (f32); enough blocks: one row group
    assert backward_plan("b", 4, 1, 4096, 4096, 4096, False) == (1, 512 * 4, False)
    # few strips: rows split into groups, added atomically into zeroed memory
    groups, blocks, zero = backward_plan("b", 4, 1, 2**21, 4, 32, False)
    assert groups > 1 and blocks == groups and zero
    # a broadcast operand's gradient is summed over the batch: atomic write-out
    assert backward_plan("a", 4, 3, 64, 64, 64, True)[2]
    # short rows and empty products
    assert backward_plan("a", 4, 1, 2**21, 4, 4, False)[0] == 0
    assert backward_plan("b", 4, 1, 16, 4096, 4096, False)[0] == 0
    assert backward_plan("a", 4, 1, 0, 5, 5, False) == (0, 0, True)
    assert backward_plan("b", 4, 1, 5, 5, 0, False) == (0, 0, True)


@pytest.mark.parametrize("sms", SM_COUNTS)
def test_thresholds_scale_with_the_sm_count(sms):
    # splitk while the 64x64 tiles give fewer than 2 blocks per SM
    tiles_just_below = 2 * sms - 1
    assert plan.choose_tile("f32", False, tiles_just_below, 64, 64, 4096, sms=sms) == "splitk"
    assert plan.choose_tile("f32", False, 2 * sms, 64, 64, 4096, sms=sms) != "splitk"
    # the small tile while the large one gives fewer blocks than half the SMs (f32: 128x128)
    half = sms // 2
    assert plan.choose_tile("f32", False, half - 1, 128, 128, sms=sms) == "s"
    assert plan.choose_tile("f32", False, half, 128, 128, sms=sms) == ""
    # split-K aims at about 4 blocks per SM
    splits, _ = plan.split_k("f32", False, 1, 64, 64, 1 << 20, sms=sms)
    assert 0.95 * 4 * sms <= splits <= 4 * sms  # slices rounded up to whole K tiles
    # row kernels stride beyond 64 blocks per SM, the reduce beyond 32
    rows = plan.make_plan("maxplus", "f32", False, "nn", 1, 1 << 28, 4, 4, False, sms=sms)
    assert rows.grid == (64 * sms, 1)
    split = plan.make_plan("maxplus", "f32", False, "nn", 1, 2048, 64, 1 << 16, False, sms=sms, tile="splitk")
    assert split.splits > 1 and split.reduce_blocks == min(2048 * 64 // fragments.REDUCE_THREADS, 32 * sms)


def test_fewer_sms_split_less_and_pick_the_large_tile_sooner():
    few, many = (plan.split_k("f32", False, 1, 256, 256, 4096, sms=s) for s in (16, 132))
    assert few < many
    assert plan.choose_tile("f32", False, 1, 1024, 1024, 100, sms=16) == ""  # 64 blocks fill 16 SMs
    assert plan.choose_tile("f32", False, 1, 1024, 1024, 100, sms=170) == "s"
    many, few = (plan.backward_plan("a", 4, 1, 64, 4096, 4096, False, sms=s) for s in (132, 16))
    assert many[0] > few[0]  # fewer SMs: fewer column groups


def test_one_slice_writes_the_result_itself():
    """A split-K plan of one slice (K short, or the medium tile "m") launches the product alone: its kernel
    writes C, no workspace and no reduce; "m" keeps one slice where split_k would cut K."""
    p = plan.make_plan("maxplus", "f32", False, "nn", 1024, 64, 64, 64, True, sms=H100)
    assert (p.kind, p.name, p.splits, p.reduce) == ("splitk", "maxplus_f32_splitk", 1, "")
    assert p.kslice == 64 and p.grid == (1, 1024)
    m = plan.make_plan("maxplus", "f32", False, "nn", 4, 64, 64, 4096, True, sms=H100, tile="m")
    assert m.splits == 1 and m.kslice == 4096 and not m.reduce
    assert plan.make_plan("maxplus", "f32", False, "nn", 4, 64, 64, 4096, True, sms=H100, tile="splitk").splits > 1
    odd = plan.make_plan("minplus", "i32", False, "nt", 512, 100, 70, 37, True, sms=H100, tile="m")
    assert odd.kslice == 48 and odd.grid == (4, 512)  # K rounded up to whole K tiles, 2 x 2 tiles of 64


def test_plans_are_pure():
    args = ("maxmul", "i64", True, "tn", 3, 300, 200, 700, True)
    assert plan.make_plan(*args, sms=H100) == plan.make_plan(*args, sms=H100)
    assert plan.make_plan(*args, sms=H100).name == fragments.Spec.parse(plan.make_plan(*args, sms=H100).name).name


def test_layouts():
    assert plan.matrix_layout((4, 6), (6, 1)) == ("n", 6)
    assert plan.matrix_layout((4, 6), (1, 4)) == ("t", 4)  # X.T of a C-contiguous (6, 4)
    assert plan.matrix_layout((4, 6), (8, 1)) == ("n", 8)  # a row-major slice
    assert plan.matrix_layout((4, 6), (12, 2)) is None  # every other column
    assert plan.matrix_layout((4, 6), (0, 1)) is None  # broadcast rows
    assert plan.matrix_layout((1, 6), (99, 1)) == ("n", 6)
    assert plan.matrix_layout((4, 1), (1, 7)) == ("n", 1)
    assert plan.matrix_layout((0, 0), (0, 0)) == ("n", 1)
    assert plan.operand_layout((3, 4, 6), (24, 6, 1)) == ("n", 6, 24)
    assert plan.operand_layout((3, 4, 6), (24, 1, 4)) == ("t", 4, 24)
    assert plan.operand_layout((1, 4, 6), (-5, 6, 1)) == ("n", 6, 0)  # a batch of one: its stride is never read
    assert plan.operand_layout((3, 4, 6), (-24, 6, 1)) is None
    assert plan.operand_layout((2, 2, 2), (1, 2, 4)) is None  # a full reversal: neither rows nor columns
    assert plan.operand_layout((0, 2, 3), (0, 0, 0)) == ("n", 3, 0)  # empty: any strides will do
    assert plan.operand_layout((3, 0), (0, 0)) == ("n", 1, 0)

"""Counting tropical numbers: the NumPy kernel and einsum against enumeration; the CUDA kernel compiles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lazykern.tropical import _reference_einsum, counting

from .test_tropical_einsum import device_route  # the GPU route on the host


def enumerate_counts(inputs, ops, counts, semiring="maxplus"):
    """(best, number of weighted assignments reaching it) over every assignment of every label."""
    sizes = {c: n for t, op in zip(inputs, ops) for c, n in zip(t, op.shape)}
    labels = sorted(sizes)
    best, total = None, 0
    for combo in itertools.product(*(range(sizes[c]) for c in labels)):
        a = dict(zip(labels, combo))
        v = sum(op[tuple(a[c] for c in t)] for t, op in zip(inputs, ops))
        w = np.prod([cnt[tuple(a[c] for c in t)] for t, cnt in zip(inputs, counts)])
        if best is None or (v < best if semiring == "minplus" else v > best):
            best, total = v, w
        elif v == best:
            total += w
    return best, total


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_counting_einsum_matches_enumeration(seed, semiring):
    rng = np.random.default_rng(seed)
    inputs = [("a", "b"), ("b", "c", "c"), ("c", "a"), ("d",), ()]
    sizes = {"a": 2, "b": 3, "c": 2, "d": 3}
    ops = [rng.integers(-2, 3, tuple(sizes[c] for c in t)).astype(np.float64) for t in inputs]
    counts = [rng.integers(1, 4, op.shape).astype(np.int64) for op in ops]
    v, c = counting.einsum("ab,bcc,ca,d,->", *zip(ops, counts), semiring=semiring)
    # the diagonal of "bcc" is what enumeration over the label c sees
    diag_ops = [ops[0], np.einsum("bcc->bc", ops[1]), ops[2], ops[3], ops[4]]
    diag_counts = [counts[0], np.einsum("bcc->bc", counts[1]), counts[2], counts[3], counts[4]]
    want = enumerate_counts([("a", "b"), ("b", "c"), ("c", "a"), ("d",), ()], diag_ops, diag_counts, semiring)
    assert (float(v), int(c)) == (float(want[0]), int(want[1]))
    sliced = counting.einsum("ab,bcc,ca,d,->", *zip(ops, counts), semiring=semiring, slices="ab")
    assert (float(sliced[0]), int(sliced[1])) == (float(want[0]), int(want[1]))


def test_count_bmm_ties_reset_and_nan():
    Av = np.array([[[1.0, 3.0, 3.0, np.nan, 2.0]]])
    Ac = np.array([[[5, 2, 4, 7, 1]]])
    Bv, Bc = np.zeros((1, 5, 1)), np.ones((1, 5, 1), np.int64)
    v, c = _reference_einsum.count_bmm(Av, Ac, Bv, Bc)
    assert v[0, 0, 0] == 3.0 and c[0, 0, 0] == 6
    v, c = _reference_einsum.count_bmm(Av, Ac, Bv, Bc, "minplus")
    assert v[0, 0, 0] == 1.0 and c[0, 0, 0] == 5
    v, c = _reference_einsum.count_bmm(Av[:, :, :0], Ac[:, :, :0], Bv[:, :0], Bc[:, :0])
    assert v[0, 0, 0] == -np.inf and c[0, 0, 0] == 0
    with pytest.raises(ValueError, match="counting supports"):
        _reference_einsum.count_bmm(Av, Ac, Bv, Bc, "maxmul")


def test_float_counts_and_input_errors():
    v, c = counting.einsum("i,i->", (np.array([1.0, 1.0]), np.array([0.5, 2.0])), np.zeros(2))
    assert float(v) == 1.0 and float(c) == 2.5
    with pytest.raises(TypeError, match="counts int64/float64"):
        counting.einsum("i->", (np.zeros(2), np.zeros(2, np.int32)))
    with pytest.raises(TypeError, match="values must be float32/float64"):
        counting.einsum("i->", np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="counting supports"):
        counting.einsum("i->", np.zeros(2), semiring="maxmul")


def test_kernels_are_lazy_and_compile_for_sm90(cache):
    fam = counting.make_family(cache)
    assert len(fam.names()) == 12 and fam.compiled() == []  # 2 semirings x 2 value x 3 count types
    names = ["count_max_f32_i64", "count_max_f32_m32", "count_min_f64_f64"]
    kernels = fam.warm(names, arch="sm_90")
    assert [k.name for k in kernels] == names
    assert all(len(k.code) > 1000 for k in kernels)
    assert fam.compiled() == names
    assert counting.kernel_name("minplus", np.dtype("float32"), np.dtype("float64")) == "count_min_f32_f64"


@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_count_bmm_reads_views_through_their_strides(semiring):
    """Transposed, permuted and broadcast operands give the product of their contiguous copies; values
    and counts that lie differently are both copied (the kernel reads one set of strides)."""
    from lazykern.tropical import _backend

    be = _backend.Backend("cupy", np)
    rng = np.random.default_rng(4)
    base_v = rng.integers(-3, 3, (4, 3, 5)).astype(np.float32)  # few values: ties on purpose
    base_c = rng.integers(1, 4, (4, 3, 5)).astype(np.int64)
    B_v = rng.integers(-3, 3, (1, 4, 2)).astype(np.float32)
    B_c = rng.integers(1, 4, (1, 4, 2)).astype(np.int64)
    cases = [
        (base_v.transpose(1, 2, 0), base_c.transpose(1, 2, 0)),  # (3, 5, 4): a permuted view, strides (5, 1, 15)
        (base_v.transpose(1, 2, 0), np.ascontiguousarray(base_c.transpose(1, 2, 0))),  # the parts lie differently
    ]
    for Av, Ac in cases:
        Bv, Bc = B_v, B_c
        got = counting.count_bmm(be, Av, Ac, Bv, Bc, semiring)  # B broadcast over the batch
        want = _reference_einsum.count_bmm(np.ascontiguousarray(Av), np.ascontiguousarray(Ac), Bv, Bc, semiring)
        for g, w in zip(got, want):
            assert g.flags.c_contiguous
            np.testing.assert_array_equal(g, w)
        Bt_v, Bt_c = (np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1) for x in (Bv, Bc))  # "t" views
        got = counting.count_bmm(be, Av, Ac, Bt_v, Bt_c, semiring)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("L", [8, 10])
def test_degeneracy_sweeps_the_boundary_in_place(L):
    """The counting contraction of a lattice on the GPU route takes the strided step too: the energy and
    ground-state count are the transfer matrix's, and the boundary (values and counts) is copied a
    few times, not once per step."""
    from unittest import mock

    from lazykern.tropical import _backend, _contract
    from lazykern.tropical import networks as nw

    from ._spin_oracles import transfer_matrix

    sg = nw.square_lattice(L, seed=L)
    copies, rows = [], []
    contiguous, strided = _backend.Backend.contiguous, counting.CountingAlgebra.rows

    def counting_copy(self, x):
        if x.ndim >= L and not x.flags.c_contiguous:  # the boundary (L spins), not a group's tensor
            copies.append(x.shape)
        return contiguous(self, x)

    def recorded(self, X, Y, lay):
        rows.append(lay["dims"])
        return strided(self, X, Y, lay)

    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "contiguous", counting_copy),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(counting.CountingAlgebra, "rows", recorded),
    ):
        got = nw.degeneracy(sg, memory_limit=2**28)
    assert got == transfer_matrix(sg, L)
    assert len(rows) >= L * L // 2 and len(copies) <= 2 * 8, (len(rows), copies)  # values and counts: a few each

"""Counting tropical numbers: the NumPy kernel and einsum against enumeration; the CUDA kernel compiles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.launch import _device
from lazykern.tn import _crt, _reference_einsum, counting
from lazykern.tn import networks as nw
from lazykern.tn.counts import launch, passes
from lazykern.tn.spinglass import counts as spin_counts

from ._spin_oracles import transfer_matrix
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
    # 2 semirings x 2 value types x (4 count types' products; row kernels of 3 tiles, for 4 count
    # types and 2-4 residues; bit-addressed steps of 0-4 spins out and in, for the same count rings)
    assert len(fam.names()) == 108 + 2 * 2 * 7 * 2 * 25 + 2 * 2 * 25 and fam.compiled() == []  # + int16 / u128
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
    from lazykern.tn import _backend

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
    """The counting contraction of a lattice on the GPU route reads the boundary where it lies (bit
    addressed) and writes most steps over it: the energy and ground-state count are the transfer
    matrix's, and the boundary (values and counts) is never copied."""
    from unittest import mock

    from lazykern.tn import _backend, _contract

    sg = nw.square_lattice(L, seed=L)
    copies, steps = [], []
    contiguous, bits = _backend.Backend.contiguous, counting.CountingAlgebra.bits

    def counting_copy(self, x):
        if x.ndim >= L and not x.flags.c_contiguous:  # the boundary (L spins), not a group's tensor
            copies.append(x.shape)
        return contiguous(self, x)

    def recorded(self, X, Y, lay, inplace):
        steps.append(inplace)
        return bits(self, X, Y, lay, inplace)

    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "contiguous", counting_copy),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(counting.CountingAlgebra, "bits", recorded),
        # every step in the passes: none run once on the host beforehand (lazykern/tn/_shared.py)
        mock.patch.object(passes, "share", lambda net, plan, inputs, operands: (inputs, operands, plan)),
    ):
        got = nw.degeneracy(sg, memory_limit=2**28)
    assert got == transfer_matrix(sg, L)
    assert len(steps) >= L * L // 2 and not copies, (len(steps), copies)
    assert sum(steps) >= L * L // 2  # in place: a spin in, a spin out


# ----------------------------------------------------------------- exact counts past int64 --
def _free_rows(L, rows, seed):
    """An L x L +-J lattice whose couplings touching the first ``rows`` rows are 0: those spins are
    free, so the count is 2^(rows * L) times the rest's."""
    sg = nw.square_lattice(L, seed=seed)
    J = np.where((sg.edges < rows * L).any(axis=1), 0.0, sg.J)
    return nw.SpinGlass(sg.n, sg.edges, J)


def test_degeneracy_past_2_63_is_exact_on_the_cpu():
    sg = _free_rows(12, 6, seed=3)
    E0, count = transfer_matrix(sg, 12)
    assert count > 2**68  # 2^72 times the lower half's count
    got = nw.degeneracy(sg)
    assert got == (E0, count) and type(got[1]) is int
    ferro = nw.square_lattice(12, J="ferro")  # 67 free spins, the other 77 one ferromagnetic cluster
    J = np.where((ferro.edges < 67).any(axis=1), 0.0, ferro.J)
    free = nw.SpinGlass(144, ferro.edges, J)
    assert nw.degeneracy(free) == (-float(J.sum()), 2**68) == transfer_matrix(free, 12)
    zero = nw.SpinGlass(64, nw.square_lattice(8).edges, np.zeros(112))  # 8 x 8, J = 0: every state
    assert nw.degeneracy(zero) == (0.0, 2**64)
    assert transfer_matrix(zero, 8) == (0.0, 2**64)


def test_degeneracy_past_2_63_on_a_sliced_plan():
    from lazykern.errors import LazykernWarning

    sg = _free_rows(9, 7, seed=5)  # 2^63 <= count: prime passes, each summing its slices modulo p
    E0, count = transfer_matrix(sg, 9)
    assert count >= 2**63
    assert nw.degeneracy(sg, slices=[70, 75]) == (E0, count)
    with pytest.warns(LazykernWarning, match="round past 2"):
        assert nw.degeneracy(sg, count_dtype=np.float64)[1] == pytest.approx(float(count))


def test_float_counts_past_2_53_warn():
    from lazykern.errors import LazykernWarning

    zero = nw.SpinGlass(60, [(i, i + 1) for i in range(59)], np.zeros(59))
    with pytest.warns(LazykernWarning, match="round past 2"):
        assert nw.degeneracy(zero, count_dtype=np.float64) == (0.0, 2.0**60)
    assert nw.degeneracy(zero, count_dtype=object) == nw.degeneracy(zero, count_dtype=np.int32) == (0.0, 2**60)
    with pytest.raises(TypeError, match="count_dtype must be"):
        nw.degeneracy(zero, count_dtype=np.float32)


def _python_counts(inputs, ops, counts, semiring="maxplus"):
    """enumerate_counts with Python ints: no product wraps."""
    sizes = {c: n for t, op in zip(inputs, ops) for c, n in zip(t, op.shape)}
    labels = sorted(sizes)
    best, total = None, 0
    for combo in itertools.product(*(range(sizes[c]) for c in labels)):
        a = dict(zip(labels, combo))
        v = sum(op[tuple(a[c] for c in t)] for t, op in zip(inputs, ops))
        w = 1
        for t, cnt in zip(inputs, counts):
            w *= int(cnt[tuple(a[c] for c in t)])
        if best is None or (v < best if semiring == "minplus" else v > best):
            best, total = v, w
        elif v == best:
            total += w
    return best, total


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_counting_einsum_is_exact_past_int64(seed, semiring):
    """Operand counts near 2^62 (products near 2^186): int64 would wrap; the counts are the Python
    ints enumeration gives, negative counts included."""
    rng = np.random.default_rng(seed)
    inputs = [("a", "b"), ("b", "c"), ("c", "a"), ("d",)]
    sizes = {"a": 2, "b": 3, "c": 2, "d": 3}
    ops = [rng.integers(-1, 2, tuple(sizes[c] for c in t)).astype(np.float64) for t in inputs]
    counts = [rng.integers(-(2**62), 2**62, op.shape) for op in ops]
    v, c = counting.einsum("ab,bc,ca,d->", *zip(ops, counts), semiring=semiring)
    want = _python_counts(inputs, ops, counts, semiring)
    assert (float(v), c) == (float(want[0]), want[1]) and type(c) is int
    v, c = counting.einsum("ab,bc,ca,d->a", *zip(ops, counts), semiring=semiring, slices="b")
    assert c.dtype == object
    for a in range(2):  # entry a: the network with label a fixed
        ops_a = [ops[0][a : a + 1], ops[1], ops[2][:, a : a + 1], ops[3]]
        counts_a = [counts[0][a : a + 1], counts[1], counts[2][:, a : a + 1], counts[3]]
        best, total = _python_counts(inputs, ops_a, counts_a, semiring)
        assert (float(v[a]), c[a]) == (float(best), total)


def test_small_counts_stay_one_int64_pass():
    calls = []
    real = counting.contract_network

    def counted(*a, **kw):
        calls.append(kw["algebra"].moduli)
        return real(*a, **kw)

    from unittest import mock

    with mock.patch.object(counting, "contract_network", counted):
        v, c = counting.einsum("i,j->", np.zeros(2), (np.zeros(3), np.array([2**40, 1, 2])))
        assert c.dtype == np.int64 and int(c) == 2 * (2**40 + 3) and calls == [()]
        calls.clear()
        sg = nw.square_lattice(8, J="ferro")  # 64 spins: 2^64 is a possible count, so the float64 pass bounds it
        E0, count = nw.degeneracy(sg)
        # that pass's count is proven exact (its rounding cannot reach 1): no second pass
        assert (E0, count) == (-112.0, 2) and type(count) is int and calls == [()]


@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_modular_product_on_the_device_route(semiring):
    """The counting kernels' modular arithmetic (int32 residues, 64-bit products) as the GPU route
    takes it, against Python ints reduced modulo p."""
    from lazykern.tn import _backend

    be = _backend.Backend("cupy", np)
    p = 2**31 - 1
    rng = np.random.default_rng(7)
    Av = rng.integers(-2, 2, (2, 3, 6)).astype(np.float32)
    Bv = rng.integers(-2, 2, (1, 6, 4)).astype(np.float32)
    Ac = rng.integers(0, p, Av.shape).astype(np.int32)
    Bc = rng.integers(0, p, Bv.shape).astype(np.int32)
    v, c = counting.count_bmm(be, Av, Ac, Bv, Bc, semiring, modulus=p)
    for b, i, j in itertools.product(range(2), range(3), range(4)):
        sums = Av[b, i] + Bv[0, :, j]
        best = sums.max() if semiring == "maxplus" else sums.min()
        want = sum(int(Ac[b, i, k]) * int(Bc[0, k, j]) for k in range(6) if sums[k] == best) % p
        assert v[b, i, j] == best and int(c[b, i, j]) == want and c.dtype == np.int32


def test_degeneracy_on_the_device_route_past_int64():
    """The GPU route (strided steps, modular kernels) on the host: 2^72 ground states exactly."""
    from unittest import mock

    from lazykern.tn import _backend, _contract

    sg = _free_rows(10, 7, seed=2)
    E0, count = transfer_matrix(sg, 10)
    assert count > 2**70
    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
    ):
        assert nw.degeneracy(sg, memory_limit=2**28) == (E0, count)


# ------------------------------------------------------------------------------ on a GPU --
@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_exact_degeneracy_on_the_gpu(lib, monkeypatch):
    """Counts past 2^63 on the GPU (int64 pass, then int32 residues modulo primes): 12 x 12 with
    72 free spins, 8 x 8 with J = 0 (2^64), 16 x 16 +-J against the big-integer transfer method."""
    # The device path itself is under test: no routing of these small networks to the host.
    monkeypatch.setattr(spin_counts, "route", lambda sg, module, dtype, optimize, *rest: (module, optimize))
    module = pytest.importorskip(lib)
    sg = _free_rows(12, 6, seed=3)
    assert nw.degeneracy(sg, module=module) == transfer_matrix(sg, 12)
    assert nw.degeneracy(sg, module=lib) == transfer_matrix(sg, 12)  # the module by name
    zero = nw.SpinGlass(64, nw.square_lattice(8).edges, np.zeros(112))
    assert nw.degeneracy(zero, module=module) == (0.0, 2**64)
    sg = nw.square_lattice(16, seed=16)
    assert nw.degeneracy(sg, module=module) == transfer_matrix(sg, 16)


@pytest.mark.gpu
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_modular_kernel_matches_python_ints(semiring):
    cupy = pytest.importorskip("cupy")
    from lazykern.tn import _backend

    be = _backend.Backend("cupy", cupy)
    p = 2147483629
    rng = np.random.default_rng(11)
    Av = rng.integers(-2, 2, (3, 33, 7)).astype(np.float32)
    Bv = rng.integers(-2, 2, (3, 7, 17)).astype(np.float32)
    Ac = rng.integers(0, p, Av.shape).astype(np.int32)
    Bc = rng.integers(0, p, Bv.shape).astype(np.int32)
    v, c = counting.count_bmm(be, *(cupy.asarray(x) for x in (Av, Ac, Bv, Bc)), semiring, modulus=p)
    want_v, want_c = _reference_einsum.count_bmm(Av, Ac, Bv, Bc, semiring, p)
    np.testing.assert_array_equal(cupy.asnumpy(v), want_v)
    np.testing.assert_array_equal(cupy.asnumpy(c), want_c)
    big_a = rng.integers(2**62, 2**63 - 1, Av.shape)  # int64 counts: counted modulo 2^64, as NumPy wraps
    big_b = rng.integers(2**62, 2**63 - 1, Bv.shape)
    v, c = counting.count_bmm(be, *(cupy.asarray(x) for x in (Av, big_a, Bv, big_b)), semiring)
    want_v, want_c = _reference_einsum.count_bmm(Av, big_a, Bv, big_b, semiring)
    np.testing.assert_array_equal(cupy.asnumpy(c), want_c)


def test_float_counts_past_2_53_warn_in_einsum_and_integer_values_are_refused():
    from lazykern.errors import LazykernWarning

    with pytest.warns(LazykernWarning, match="round past 2"):
        v, c = counting.einsum("i,i->", (np.zeros(2), np.full(2, 2.0**53)), np.zeros(2))
    assert float(c) == 2.0**54
    with pytest.raises(TypeError, match="degeneracy counts with float values"):
        nw.degeneracy(nw.square_lattice(3), dtype=np.int32)


@pytest.mark.parametrize("seed", range(3))
def test_the_oracles_agree_with_brute_force(seed):
    """The transfer method on a rectangle with fields, and matching with none, against all 2^15 states."""
    from ._spin_oracles import brute_force, matching_energy

    rng = np.random.default_rng(seed)
    W, L = 5, 3
    idx = np.arange(L * W).reshape(L, W)
    edges = [(idx[r, c], idx[r, c + 1]) for r in range(L) for c in range(W - 1)]
    edges += [(idx[r, c], idx[r + 1, c]) for r in range(L - 1) for c in range(W)]
    J = rng.choice([-1.0, 0.0, 1.0], len(edges)) if seed < 2 else rng.standard_normal(len(edges))
    sg = nw.SpinGlass(L * W, edges, J, h=rng.choice([-1.0, 0.0, 1.0], L * W))
    E0, count, _ = brute_force(sg)
    assert transfer_matrix(sg, L, W) == (pytest.approx(E0, abs=1e-9), count)
    no_field = nw.SpinGlass(L * W, edges, J)
    assert matching_energy(no_field, L, W) == pytest.approx(brute_force(no_field)[0], abs=1e-9)


# ------------------------------------------------------------------ the counting row kernel --
def _rows_case(rng, residues, K=4, N=3):
    """A strided step as a sweep has it: X a permuted view (batch 2, left 3 x 5, con K), Y (2, K, N)."""
    base = rng.integers(-2, 2, (K, 2, 3, 5)).astype(np.float32)  # few values: ties on purpose
    Xv = base.transpose(1, 2, 3, 0)  # (b, i1, i2, k) read through strides, not copied
    p = [2**31 - 1, 2147483629, 2147483587, 2147483579][:residues]
    Xc = [rng.integers(0, q, (K, 2, 3, 5)).astype(np.int32).transpose(1, 2, 3, 0) for q in p]
    Yv = rng.integers(-2, 2, (2, K, N)).astype(np.float32)
    Yc = [rng.integers(0, q, (2, K, N)).astype(np.int32) for q in p]
    s = [x // 4 for x in Xv.strides]  # element strides of the view: b, i1, i2, k
    assert s[1] == 5 * s[2]  # left (i1, i2) reads as one axis of i2's stride
    lay = {"dims": (2, 15, N, K), "out_shape": (2, 3, 5, N), "a": (s[0], s[2], s[3]), "c": (15 * N, N)}
    return (Xv, *Xc), (Yv, *Yc), lay, tuple(p)


def _rows_want(X, Y, p, semiring):
    K, N = Y[0].shape[1:]
    A = np.ascontiguousarray(X[0]).reshape(2, 15, K)
    want_c = []
    for q, (xc, yc) in enumerate(zip(X[1:], Y[1:])):
        v, c = _reference_einsum.count_bmm(A, np.ascontiguousarray(xc).reshape(2, 15, K), Y[0], yc, semiring, p[q])
        want_c.append(c.reshape(2, 3, 5, N))
    return v.reshape(2, 3, 5, N), want_c


@pytest.mark.parametrize(
    ("residues", "K", "N", "tile"), [(1, 4, 3, "rows4"), (4, 4, 3, "rows4"), (2, 2, 2, "rows2"), (3, 8, 5, "rows")]
)
def test_row_launch_passes_what_the_kernel_signature_reads(residues, K, N, tile):
    """The row kernel's launch (counts.launch.launch_rows) on host arrays, its kernel replaced by a
    stand-in that reads its arguments in the order of the C signature (the lk_count_rows fragment)
    through the given strides: every residue of the step comes out of one launch, equal to the
    reference product."""
    import contextlib
    import dataclasses
    from unittest import mock

    from lazykern.tn import _backend
    from lazykern.tropical import _arrays

    X, Y, lay, p = _rows_case(np.random.default_rng(residues), residues, K, N)
    arrays: dict[int, np.ndarray] = {}
    real = _arrays.as_operand
    launches = []

    def operand(x, name, also=()):  # a host array stands for device memory: its pointer names it
        arrays[id(x)] = x
        return dataclasses.replace(real(x, name, also), ptr=id(x), device=0)

    def fake(name, arch):
        R = int(name.rsplit("x", 1)[1]) if "_m32x" in name else 1

        def kernel(*args):
            av, bv, cv, *ptrs = args[:15]
            rows, M, N, K, sa, ars, acs, sb, sc, ldc, *mods = args[15:]
            launches.append((name, arch))
            batch = rows // M
            ac, bc, cc = (ptrs[4 * j : 4 * j + R] for j in range(3))
            for q in range(R):
                view = [
                    launch.strided(arrays[ptr], shape, st)
                    for ptr, shape, st in (
                        (av, (batch, M, K), (sa, ars, acs)),
                        (ac[q], (batch, M, K), (sa, ars, acs)),
                        (bv, (batch, K, N), (sb, N, 1)),
                        (bc[q], (batch, K, N), (sb, N, 1)),
                    )
                ]
                v, c = _reference_einsum.count_bmm(*(np.ascontiguousarray(x) for x in view), semiring, int(mods[q]))
                launch.strided(arrays[cv], (batch, M, N), (sc, ldc, 1), True)[...] = v
                launch.strided(arrays[cc[q]], (batch, M, N), (sc, ldc, 1), True)[...] = c

        return mock.MagicMock(__getitem__=lambda self, grid: kernel)

    for semiring in ("maxplus", "minplus"):
        out = tuple(np.empty(lay["out_shape"], x.dtype) for x in X)
        strides = (lay["a"], (lay["dims"][3] * lay["dims"][2], lay["dims"][2], 1), lay["c"])
        with (
            mock.patch.object(_arrays, "as_operand", operand),
            mock.patch.object(counting.family, "get", fake),
            mock.patch.object(_device, "on", lambda d: contextlib.nullcontext()),
            mock.patch.object(_device, "arch", lambda d: "sm_90"),
        ):
            launch.launch_rows(_backend.Backend("cupy", np), X, Y, out, lay["dims"], strides, semiring, p)
        want_v, want_c = _rows_want(X, Y, p, semiring)
        np.testing.assert_array_equal(out[0], want_v)
        assert len(out) == 1 + residues
        for got, want in zip(out[1:], want_c):
            np.testing.assert_array_equal(got, want)
    more = f"x{residues}" if residues > 1 else ""  # the smallest tile that holds K and N
    assert launches == [(f"count_{tile}_max_f32_m32{more}", "sm_90"), (f"count_{tile}_min_f32_m32{more}", "sm_90")]


def test_row_kernels_compile_for_sm90(cache):
    fam = counting.make_family(cache)
    names = [
        "count_rows_max_f32_i64",
        "count_rows4_min_f64_m32",
        "count_rows2_max_f32_m32x2",
        "count_rows_min_f32_m32x4",
    ]
    assert [k.name for k in fam.warm(names, arch="sm_90")] == names


@pytest.mark.gpu
@pytest.mark.parametrize(("residues", "K", "N"), [(1, 4, 3), (2, 2, 2), (4, 8, 5), (3, 3, 7)])
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_row_kernel_matches_the_reference_on_the_gpu(residues, K, N, semiring):
    cupy = pytest.importorskip("cupy")
    from lazykern.tn import _backend

    X, Y, lay, p = _rows_case(np.random.default_rng(residues), residues, K, N)
    dX = tuple(cupy.asarray(np.ascontiguousarray(x.transpose(3, 0, 1, 2))).transpose(1, 2, 3, 0) for x in X)
    assert dX[0].strides == X[0].strides  # the same permuted view, on the device
    alg = counting.algebra(*p)(semiring, _backend.Backend("cupy", cupy), False)
    out = alg.rows(dX, tuple(cupy.asarray(y) for y in Y), lay)
    want_v, want_c = _rows_want(X, Y, p, semiring)
    np.testing.assert_array_equal(cupy.asnumpy(out[0]), want_v)
    for got, want in zip(out[1:], want_c):
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
    big = [np.random.default_rng(3).integers(2**62, 2**63 - 1, x.shape) for x in (X[1], Y[1])]  # int64 rows
    alg = counting.CountingAlgebra(semiring, _backend.Backend("cupy", cupy), False)
    dbig = cupy.asarray(np.ascontiguousarray(big[0].transpose(3, 0, 1, 2))).transpose(1, 2, 3, 0)
    out = alg.rows((dX[0], dbig), (cupy.asarray(Y[0]), cupy.asarray(big[1])), lay)
    A = np.ascontiguousarray(X[0]).reshape(2, 15, K)
    v, c = _reference_einsum.count_bmm(A, np.ascontiguousarray(big[0]).reshape(2, 15, K), Y[0], big[1], semiring)
    np.testing.assert_array_equal(cupy.asnumpy(out[0]), v.reshape(2, 3, 5, N))
    np.testing.assert_array_equal(cupy.asnumpy(out[1]), c.reshape(2, 3, 5, N))


def test_residues_per_pass_follow_the_predicted_peak():
    """As many residues as the plan's predicted peak at their width fits in free memory (the pool's
    margin included; on the host the available RAM), at least one (the plan was fit for it); four where
    the memory is unknown."""
    from types import SimpleNamespace

    from lazykern.tn import _cost

    def net(free):
        be = SimpleNamespace(budget_bytes=lambda: free, dtype=lambda x: x.dtype)
        leaf = SimpleNamespace(parts=(np.zeros(1, np.float32),))
        margin = _cost.POOL_MARGIN  # the network's (the pool's here; Network.margin)
        return SimpleNamespace(
            be=be,
            leaves=[leaf],
            peak=lambda plan, entry_bytes: 1000 * entry_bytes,
            margin=lambda plan, width: margin,
            arena_run=lambda plan, entry_bytes: None,  # no arena takes the run (tests/test_tn_count_arena.py)
        )

    margin = _cost.POOL_MARGIN
    assert counting.residues_per_pass(net(None), None) == counting.RESIDUES_MAX
    assert counting.residues_per_pass(net(int(1000 * 16 * margin) + 1), None) == 3  # 4 + 3 * 4 bytes an entry
    assert counting.residues_per_pass(net(int(1000 * 20 * margin) + 1), None) == 4
    assert counting.residues_per_pass(net(int(1000 * 12 * margin) + 1), None) == 2  # the int64 pass's width
    assert counting.residues_per_pass(net(10), None) == 1


def test_two_residues_a_pass_on_the_device_route_past_int64():
    """Two residues a pass (what fits when the plan fills memory at the int64 width), one launch of the
    row kernel per step: the passes are primes two by two (no int64 pass: two primes ride in its bytes),
    and the count is the transfer method's big integer; where only one residue a pass fits, the int64
    pass comes first."""
    from unittest import mock

    from lazykern.tn import _backend, _contract

    sg = _free_rows(10, 7, seed=2)
    E0, count = transfer_matrix(sg, 10)
    calls = []
    real = counting.contract_network

    def counted(*a, **kw):
        calls.append(kw["algebra"].moduli)
        return real(*a, **kw)

    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(passes, "residues_per_pass", lambda net, plan: 2),  # as on an 80 GB GPU at 32 x 32
        mock.patch.object(counting, "contract_network", counted),
        mock.patch.object(counting, "WIDE_PASS", False),  # the primes' passes (tests/test_tn_count_wide.py: one)
    ):
        assert nw.degeneracy(sg, memory_limit=2**28) == (E0, count)
    # about 2^72: the float64 pass first (each count's interval sets the primes), then the primes two by
    # two, in order, as many as the interval's width needs (no int64 pass: two primes ride in its bytes),
    # fewer than a bound on the count alone would (the moduli's product past twice the count)
    used = [q for moduli in calls for q in moduli]
    assert count > 2**70 and 0 < len(used) < len(_crt.primes_for(1, count))
    assert calls[0] == () and calls[1] == tuple(itertools.islice(_crt.primes(), 2)) and () not in calls[1:]
    assert used == list(itertools.islice(_crt.primes(), len(used)))
    calls.clear()
    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(passes, "residues_per_pass", lambda net, plan: 1),
        mock.patch.object(counting, "contract_network", counted),
        mock.patch.object(counting, "WIDE_PASS", False),
    ):
        assert nw.degeneracy(sg, memory_limit=2**28) == (E0, count)
    assert calls[:2] == [(), ()] and all(len(m) == 1 for m in calls[2:])  # the float64 bound, int64, primes


def test_the_counting_passes_are_profiled_round_by_round(caplog):
    """Issue 45 asks for the profile in the benchmark's JSON: every exact count past int64 logs its rounds
    (each round's passes: moduli, device; wall seconds) as a ``spread_profile``, one pass a round on one
    device, one pass per lane a round over several (the unit that scales over GPUs)."""
    sg = _free_rows(10, 7, seed=2)  # about 2^72 ground states: the float64 pass (each count's interval), int64
    E0, count = transfer_matrix(sg, 10)
    with caplog.at_level("DEBUG", logger="lazykern"):
        assert nw.degeneracy(sg) == (E0, count)
    [profile] = [
        r.spread_profile for r in caplog.records if getattr(r, "spread_profile", {}).get("kind") == "counting rounds"
    ]
    # the interval is narrower than 2^64: the int64 pass alone rebuilds the count (a bound on it alone: a prime too)
    assert profile["span_bits"] < 64 < profile["bound_bits"] <= count.bit_length() + 1
    assert [[p["moduli"] for p in r["passes"]] for r in profile["rounds"]] == [[[]]] and profile["primes"] == 0
    assert all(r["seconds"] >= 0 for r in profile["rounds"]) and profile["bound_seconds"] > 0

    count = 2**140 + 12345  # a count the passes give modulo each of their moduli, on two lanes

    def run(moduli, device=None):
        return (np.zeros(()), *(np.array(count % p if p else count % 2**64) for p in moduli or (0,)))

    caplog.clear()
    with caplog.at_level("DEBUG", logger="lazykern"):
        _, got = counting.exact(
            nw.backend_of(np.zeros(1))[0], [tuple(range(150))], (), [np.zeros(1)], dict.fromkeys(range(150), 2),
            run, lambda: 2, lanes=[0, 1], wide=lambda: False,
        )  # fmt: skip
    assert int(got) == count
    [profile] = [r.spread_profile for r in caplog.records if hasattr(r, "spread_profile")]
    # the bound 2^150 needs 5 primes: rounds of two passes of two primes, then the last prime alone
    assert [[len(p["moduli"]) for p in r["passes"]] for r in profile["rounds"]] == [[2, 2], [1]]
    assert [p["device"] for p in profile["rounds"][0]["passes"]] == [0, 1]


def _or_chain(k: int, isolated: int) -> nw.SpinGlass:
    """A chain of OR gates over k inputs whose output is forced to 1, and ``isolated`` free spins:
    exactly (2^k - 1) * 2^isolated ground states (every input assignment but all zeros)."""
    from collections import defaultdict

    quad: dict[tuple[int, int], int] = defaultdict(int)
    lin: dict[int, int] = defaultdict(int)

    def gate(a: int, b: int, y: int) -> None:  # y = a OR b as a QUBO penalty: 0 exactly when it holds
        lin[a] += 1
        lin[b] += 1
        lin[y] += 1
        quad[(a, b)] += 1
        quad[(a, y)] -= 2
        quad[(b, y)] -= 2

    prev = 0
    for i in range(1, k):
        gate(prev, i, k + i - 1)
        prev = k + i - 1
    lin[prev] -= 1  # the last output forced to 1
    n = 2 * k - 1 + isolated
    edges, J, h = [], [], [0] * n
    for (i, j), q in quad.items():
        if q:
            edges.append((i, j))
            J.append(-q)
            h[i] -= q
            h[j] -= q
    for i, c in lin.items():
        h[i] -= 2 * c
    return nw.SpinGlass(n, edges, J, h=h)


@pytest.mark.parametrize(("k", "isolated"), [(31, 64), (31, 65), (20, 64), (3, 0), (5, 2)])
def test_counts_that_repeat_their_residues_across_primes_are_exact(k, isolated):
    """(2^31 - 1) * 2^64 ground states are 0 modulo 2^64 and modulo 2^64 * (2^31 - 1) alike: a stopping
    rule "two successive reconstructions agree" answered 0. The float64 bound sets the primes instead."""
    sg = _or_chain(k, isolated)
    if sg.n <= 12:
        from ._spin_oracles import brute_force

        assert brute_force(sg)[1] == (2**k - 1) * 2**isolated
    assert nw.degeneracy(sg)[1] == (2**k - 1) * 2**isolated


def test_einsum_counts_past_int64_whatever_their_residues():
    I64 = np.int64
    cases = [
        ([2**40], [2**55 - 2**24], 2**95 - 2**64),
        ([2**63 - 1], [2**63 - 1], (2**63 - 1) ** 2),
        ([-(2**63)], [2**63 - 1], -(2**63) * (2**63 - 1)),
        ([2**32, 2**32], [2**63 - 2**32, 1], 2**95 - 2**64 + 2**32),
    ]
    for a, b, want in cases:
        ops = [(np.zeros(len(a)), np.array(a, I64)), (np.zeros(len(b)), np.array(b, I64))]
        assert int(counting.einsum("i,i->", *ops)[1]) == want


@pytest.mark.parametrize("made", ["by hand", "for other sizes"])
def test_the_float_bound_prices_the_plan_on_the_network_itself(made):
    """A plan's own flops figure is the network's it was made for (0 for one written by hand): the
    float64 pass's rounding bound prices the path on this network. Here NumPy's float64 sum loses 12.6
    million against 2^63 (terms of 64 and 1 added one by one to a running sum near 2^63): a bound priced
    at 0 multiply-adds fell below 2^63, one int64 pass ran and wrapped."""
    from lazykern.tn.einsum import ContractionPlan, contraction_plan

    T, x = 10, 64
    R = 2**63 - (x + 3) ** T  # every output entry counts exactly 2^63
    ops = [(np.zeros(2), np.array([1, R]))]
    ops += [(np.zeros((2, 4)), np.array([[x, 1, 1, 1], [1, 0, 0, 0]]))] * T
    ops += [np.zeros(2)] + [np.zeros(4)] * T
    letters = "abcdefghij"
    inputs = ["z", *("z" + c for c in letters), "y", *letters]
    live: list = list(range(len(ops)))
    path = []

    def step(i, j):
        a, b = sorted((live.index(i), live.index(j)))
        path.append((a, b))
        live.pop(b)
        live.pop(a)
        live.append(("r", i, j))
        return live[-1]

    A = 0
    for t in range(1, T + 1):
        A = step(A, t)
    B = T + 1
    for t in range(T + 2, len(ops)):
        B = step(B, t)
    step(A, B)
    if made == "by hand":
        plan = ContractionPlan(path=tuple(path))
    else:
        sizes = dict.fromkeys(letters, 1) | {"z": 2, "y": 2}
        plan = contraction_plan([tuple(s) for s in inputs], ("y",), sizes, optimize=path, store=False)
    _, c = counting.einsum(",".join(inputs) + "->y", *ops, optimize=plan)
    assert [int(n) for n in c] == [2**63, 2**63]


def test_float_counts_take_every_operand_in_float64():
    """Any float64 counts make the pass one of floats: every operand's counts (and the ones of a plain
    array) in float64, whatever the operands' order; int64 counts past 2^53 beside them say they round."""
    z1 = np.zeros(1)
    for ops in [(z1, (z1, np.array([2.5]))), ((z1, np.array([3])), (z1, np.array([2.5])))]:
        assert float(counting.einsum("i,j->", *ops)[1]) == float(counting.einsum("i,j->", *ops[::-1])[1])
    assert float(counting.einsum("i,j->", (z1, np.array([3])), (z1, np.array([2.5])))[1]) == 7.5
    with pytest.warns(LazykernWarning, match="past 2\\^53 beside float64"):
        got = counting.einsum("i,j->", (z1, np.array([2**62])), (z1, np.array([4.0])))[1]
    assert float(got) == 2.0**64


def test_counts_past_float64_range_are_exact_and_quiet():
    """2^1030 ground states: the float64 bound pass overflows (no bound from it, the operands' bound sets
    the primes), and NumPy's overflow stays inside (warnings made errors: none leaks)."""
    import warnings

    sg = nw.SpinGlass(1030, np.zeros((0, 2), int), [])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert nw.degeneracy(sg) == (0, 2**1030)

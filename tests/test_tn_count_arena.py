"""A count's boundary held in one buffer (lazykern/tn/_arena.py with the counting algebra): its values and
every count array written over in place by the direct kernel (``count_arenaKN``), so that a pass of three
residues fits where two boundaries at a step do not (a 32 x 32 count on an 80 GB GPU)."""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from lazykern.tn import _arena, _backend, _contract, _cost, _crt, counting
from lazykern.tn import networks as nw
from lazykern.tn.contraction import network
from lazykern.tn.contraction.network import Network
from lazykern.tn.counts import kernels, passes
from lazykern.tn.spinglass import planning

from .test_tn_arena import CASES, _case
from .test_tropical_counting import _free_rows, transfer_matrix
from .test_tropical_einsum import device_route  # the GPU route on the host

E = importlib.import_module("lazykern.tn.einsum")
ROUTE = _backend.Backend("cupy", np)
HOST = _backend.Backend("numpy", np)


def _counts(rng, shape, moduli):
    """(int64 counts, the parts a pass of ``moduli`` carries: int64 itself, or int32 residues)."""
    c = rng.integers(0, 1 << 20, shape).astype(np.int64)  # products of two past 2^31, sums within int64
    if not moduli:
        return c, (c,)
    return c, tuple((c % p).astype(np.int32) for p in moduli)


def _step(xp, be, n, con, batch, right, semiring, inside, moduli, seed=0):
    """One counting step through the arena (as tests/test_tn_arena.py's energy step): X's values and
    counts held at scattered bits with free bits between (``inside``) or a C-contiguous X elsewhere; the
    result against the host's product without an arena, residue by residue."""
    rng, x_labels, y_labels, keep, xv, yv = _case(n, con, batch, right, seed)
    xc, x_parts = _counts(rng, xv.shape, moduli)
    yc, y_parts = _counts(rng, yv.shape, moduli)
    bits = n + right + 2
    arena = _arena.Arena(bits)
    if inside:
        where = [int(p) for p in rng.choice(bits, size=n, replace=False)]
        X = arena.view(be, tuple(xp.asarray(p) for p in (xv, *x_parts)), where)
        for view, part in zip(X, (xv, *x_parts)):
            view[...] = xp.asarray(part)
        arena.held = True
    else:
        X = tuple(xp.asarray(p.copy()) for p in (xv, *x_parts))
    alg = counting.algebra(*moduli)(semiring, be)
    alg.rank = {lab: i for i, lab in enumerate(sorted(set(x_labels) | set(y_labels)))}
    alg.arena = arena
    Y = tuple(xp.asarray(p) for p in (yv, *y_parts))
    launched = []
    real = type(alg).arena_step

    def arena_step(self, *a):
        launched.append(a[3]["rows"])
        return real(self, *a)

    with mock.patch.object(_contract, "STRIDED_MIN", 0), mock.patch.object(type(alg), "arena_step", arena_step):
        term, _ = _contract.contract(
            alg, _contract.Term(X, tuple(x_labels)), _contract.Term(Y, tuple(y_labels)), keep, False, (True, False)
        )
    assert launched and arena.held
    assert all(_arena._address(be, p) == _arena._address(be, b) for p, b in zip(term.parts, arena.buffers))
    host = counting.CountingAlgebra(semiring, HOST)
    want, _ = _contract.contract(
        host, _contract.Term((xv, xc), tuple(x_labels)), _contract.Term((yv, yc), tuple(y_labels)), keep, False
    )
    perm = [want.labels.index(x) for x in term.labels]
    wv, wc = (np.transpose(p, perm) for p in want.parts)
    got = [np.asarray(p.get() if hasattr(p, "get") else p) for p in term.parts]
    np.testing.assert_array_equal(got[0], wv)
    for q, part in enumerate(got[1:]):
        np.testing.assert_array_equal(part, wc % moduli[q] if moduli else wc)


@pytest.mark.parametrize(("n", "con", "batch", "right"), CASES)
@pytest.mark.parametrize("inside", [True, False])
@pytest.mark.parametrize("moduli", [(), (2147483647,), (2147483647, 2147483629, 2147483587)])
def test_a_counting_arena_step_is_the_product_whether_it_grows_shrinks_or_keeps_the_boundary(
    n, con, batch, right, inside, moduli
):
    """The direct kernel's addressing (in NumPy, as the GPU route on the host runs it), with the arena's
    holes: every value and count (int64, or each residue) is the host product's."""
    _step(np, ROUTE, n, con, batch, right, "maxplus", inside, moduli, seed=n + con)
    _step(np, ROUTE, n, con, batch, right, "minplus", inside, moduli, seed=n + right)


@contextlib.contextmanager
def _forced(free=10**12):
    """The GPU route on the host with every count's run in the arena (as where two boundaries do not fit):
    yields the moduli of each arena step's pass."""
    used = []
    real = counting.CountingAlgebra.arena_step

    def arena_step(self, *a):
        used.append(self.moduli)
        return real(self, *a)

    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(_backend.Backend, "free_bytes", lambda self: free),
        mock.patch.object(Network, "fits", lambda *a, **kw: False),
        mock.patch.object(counting.CountingAlgebra, "arena_step", arena_step),
    ):
        yield used


def test_a_count_in_the_arena_is_the_transfer_matrixs():
    """An 8 x 8 +-J lattice's degeneracy (int64 counts) and a 10 x 10 lattice's with 70 free spins (2^72
    ground states: the float64 pass, then residues) with every pass in the arena: the transfer matrix's."""
    sg = nw.square_lattice(8, seed=8)
    with _forced() as used:
        assert nw.degeneracy(sg, memory_limit=2**28) == transfer_matrix(sg, 8)
    assert used and set(used) == {()}
    sg = _free_rows(10, 7, seed=2)
    E0, count = transfer_matrix(sg, 10)
    assert count > 2**70
    with (
        _forced() as used,
        mock.patch.object(passes, "residues_per_pass", lambda net, plan: 3),
        mock.patch.object(counting, "WIDE_PASS", False),  # the primes' passes (tests/test_tn_count_wide.py: one)
    ):
        assert nw.degeneracy(sg, memory_limit=2**28) == (E0, count)
    assert () in used and any(len(m) == 2 for m in used)  # the float64 bound's pass and the primes' (2 needed)


def test_the_kernels_prefetched_are_those_the_counting_arena_launches():
    """The plan names the arena's direct kernels before a count's run: the tiles it asks for are those its
    steps launch."""
    asked, launched = [], set()
    real = counting.CountingAlgebra.arena_step

    def arena_step(self, X, Y, out, lay):
        launched.add((len(lay["con"]), len(lay["right_pos"])))
        return real(self, X, Y, out, lay)

    def prefetch(self, like, tiles, kind="bits"):
        asked.append((kind, set(tiles)))
        return []

    sg = nw.square_lattice(6, seed=6)
    with (
        _forced(),
        mock.patch.object(counting.CountingAlgebra, "arena_step", arena_step),
        mock.patch.object(counting.CountingAlgebra, "prefetch", prefetch),
    ):
        assert nw.degeneracy(sg, memory_limit=2**28) == transfer_matrix(sg, 6)
    assert asked == [("arena", launched)] and launched


def test_three_residues_fit_an_80_gb_gpu_in_one_buffer():
    """The benchmark's 32 x 32 count (an edge list, spins shuffled) with an 80 GB H100's free memory: two
    boundaries at a step of three residues (16 bytes an entry, 96 GiB) do not fit, one does (64 GiB), so a
    pass carries three residues and the count needs the float64 pass and one more. With a H200's memory
    four fit without the arena; the run takes it there too, from ARENA_FASTER entries (its direct steps are
    the quicker), and not with the line above its boundary."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import spin_glass as bench

    sg = bench.edge_list_instance(["square", 32], shuffle=True, positions=False)
    labels, tensors = nw._network(sg, sg.fitted(np, np.float32), np)
    for free, most in ((int(78.7 * 2**30), 3), (int(139 * 2**30), 4)):
        with (
            mock.patch.object(planning, "backend_of", lambda x: (ROUTE, x)),
            mock.patch.object(_backend.Backend, "free_bytes", lambda self, free=free: free),
        ):
            plan = nw._plan(sg, module=np, dtype=np.float32, count_dtype=np.int64)
        assert plan.nslices == 1 and plan.largest == 2**32
        with device_route(), mock.patch.object(_backend.Backend, "free_bytes", lambda self, free=free: free):
            net = E.build_network(labels, (), [(t, np.ones(t.shape, np.int64)) for t in tensors], "maxplus",
                                  counting.CountingAlgebra)  # fmt: skip
            assert passes.residues_per_pass(net, plan) == most
            assert passes.fits_memory(net, plan, 4 + 8)  # the float64 pass
            assert passes.fits_memory(net, plan, 4 + 16) == (most == 4)  # four: neither way on 80 GB
            three = counting.algebra(*_crt.primes_for(1, 2**90))
            wide = E.build_network(labels, (), [(t,) for t in tensors], "maxplus", three)
            wide.use_arena(plan)
            assert wide.alg.arena is not None and 1 << wide.alg.arena.bits == 2**32
            assert wide.peak(plan) * _cost.POOL_MARGIN <= free
            assert (free < net.peak(plan, entry_bytes=16)) == (most == 3)
            with mock.patch.object(network, "ARENA_FASTER", 2**33):  # where two fit, the tiled steps
                wide.use_arena(plan)
                assert (wide.alg.arena is not None) == (most == 3)


def test_the_direct_kernels_are_lazy_and_compile_for_sm90(cache):
    """``count_arenaKN`` is lk_count_bits with DIRECT (no tile, no shared memory for one): made when first
    asked for, it compiles for sm_90 on a machine without a GPU."""
    fam = counting.make_family(cache)
    names = [
        kernels.kernel_name("maxplus", np.dtype("float32"), np.dtype("int32"), rows="arena33", residues=3),
        kernels.kernel_name("minplus", np.dtype("float64"), np.dtype("float64"), rows="arena12"),
    ]
    assert names == ["count_arena33_max_f32_m32x3", "count_arena12_min_f64_f64"]
    assert fam.compiled() == []
    built = fam.warm(names, arch="sm_90")
    assert [k.name for k in built] == names and fam.compiled() == sorted(names)
    code, _ = kernels._bits_fragment(names[0])
    assert "3, true>(" in code and "3, false>(" in kernels._bits_fragment("count_bits33_max_f32_m32x3")[0]


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "con", "batch", "right"), CASES)
@pytest.mark.parametrize("moduli", [(), (2147483647, 2147483629, 2147483587)])
def test_counting_arena_steps_on_the_gpu(n, con, batch, right, moduli):
    cupy = pytest.importorskip("cupy")
    be = _backend.Backend("cupy", cupy)
    for inside in (True, False):
        _step(cupy, be, n, con, batch, right, "maxplus", inside, moduli, seed=n + con)
        _step(cupy, be, n, con, batch, right, "minplus", inside, moduli, seed=n + right)


@pytest.mark.gpu
def test_a_count_in_the_arena_on_the_gpu_is_the_transfer_matrixs(monkeypatch):
    """A 16 x 16 +-J count and a 12 x 12 one past 2^63 on CuPy with every pass's boundary forced into the
    arena: the transfer matrix's big integers."""
    cupy = pytest.importorskip("cupy")
    from lazykern.tn.spinglass import counts as spin_counts

    monkeypatch.setattr(spin_counts, "route", lambda sg, module, dtype, optimize, *rest: (module, optimize))
    used = []
    real = counting.CountingAlgebra.arena_step

    def arena_step(self, *a):
        used.append(self.moduli)
        return real(self, *a)

    monkeypatch.setattr(Network, "fits", lambda *a, **kw: False)
    monkeypatch.setattr(counting.CountingAlgebra, "arena_step", arena_step)
    monkeypatch.setattr(counting, "WIDE_PASS", False)  # the primes' passes (tests/test_tn_count_wide.py: one)
    sg = nw.square_lattice(16, seed=16)
    assert nw.degeneracy(sg, module=cupy) == transfer_matrix(sg, 16)
    sg = _free_rows(12, 6, seed=3)
    assert nw.degeneracy(sg, module=cupy) == transfer_matrix(sg, 12)
    assert used and any(len(m) >= 2 for m in used)
